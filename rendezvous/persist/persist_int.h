/* What the persist layer's files share (records.c, sync.c, recovery.c): the handle and the
 * helpers that cross them. Private to rendezvous/persist/: main.c uses persist.h. */
#ifndef MUSTERD_PERSIST_PERSIST_INT_H
#define MUSTERD_PERSIST_PERSIST_INT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"
#include "list.h"
#include "persist.h"
#include "wal.h"

struct v2_event;
struct rdzv;
struct rdzv_change;
struct v2_store;

struct persist {
  char *dir;
  enum persist_fsync mode;
  uint64_t snapshot_every;
  struct v2_store *s;
  struct rdzv *rdzv; /* NULL: /v1 not served */
  char *rdzv_blob;   /* recovery: the newest whole state found, not yet restored */
  size_t rdzv_len;
  uv_loop_t *loop;
  struct rv_server *srv;
  int lock_fd;
  int fd;             /* the current log segment, O_APPEND */
  uint64_t seg_first; /* the first index of its name */
  int stopped;
  int failed; /* a write or sync failed: stop acknowledging */

  uint64_t appended; /* records appended since start-up */
  uint64_t synced;   /* of which durable */
  uint64_t since_snap;
  struct mu_buf pending; /* batch mode: records not yet handed to the thread */

  /* the sync thread (batch mode); fields below the mutex are shared */
  uv_thread_t thread;
  int thread_started;
  uv_async_t async;
  uv_idle_t kick; /* active while records wait for a batch or a snapshot is due */
  int handles_open;
  int handles_closing;
  uv_mutex_t mu;
  uv_cond_t cond;
  int busy; /* inflight holds a batch the thread is writing */
  int quit;
  int thread_err;
  struct mu_buf inflight;
  uint64_t inflight_last;
  uint64_t thread_done; /* records durable according to the thread */

  /* /metrics */
  uint64_t m_syncs, m_bytes, m_snapshots, m_max_batch;
};

/* records.c: files, records, snapshots */

/* Writes all n bytes at p to fd. Returns: 0, or -errno. */
int persist_write(int fd, const void *p, size_t n);
/* fsync()s the directory `dir` (a rename or a new file in it is durable). Returns: 0, or -errno. */
int persist_sync_dir(const char *dir);
/* Returns: "<dir>/snap-<index, 20 digits>.snap" / "<dir>/wal-<first>.log". Caller frees. */
char *persist_snap_path(const char *dir, uint64_t index);
char *persist_wal_path(const char *dir, uint64_t first);

/* The snapshots and log segments of a data dir, each list sorted by index. */
struct persist_listing {
  uint64_t *snaps, *wals;
  size_t nsnaps, nwals;
};
/* Lists `dir`. Returns: 0, or -errno. Release with persist_listing_release(). */
int persist_list_dir(const char *dir, struct persist_listing *l);
void persist_listing_release(struct persist_listing *l);

/* Fills `r` (from scratch) as a record of `type` (WAL_REC_EVENT or WAL_REC_SNAP_EVENT) for `e`. */
void persist_event_rec(struct wal_rec *r, int type, const struct v2_event *e);
/* Appends the log record of store write `e` (with the node as it is now) to `out`.
 * Returns: 0, or MU_E2BIG. */
int persist_encode_event(struct mu_buf *out, struct v2_store *s, const struct v2_event *e);
/* Appends the whole rendezvous state as one record to `out`. Returns: 0, or an error. */
int persist_put_rdzv(struct persist *p, struct mu_buf *out);
/* Appends one change of the rendezvous state as one record to `out`. Returns: 0, or MU_E2BIG. */
int persist_encode_rdzv_change(struct persist *p, const struct rdzv_change *c, struct mu_buf *out);

/* sync.c: the log writer */

/* Waits for the thread to finish its batch (shutdown, snapshots). Returns: its error. */
int persist_wait_idle(struct persist *p);
/* Writes and syncs the pending records on the loop thread. Returns: 0, or -errno. */
int persist_flush_sync(struct persist *p);
/* Tells the server which records are durable (it sends the output held for them). */
void persist_notify_durable(struct persist *p);
/* The store's commit hook and the rendezvous' change hook (recovery.c installs them). */
void persist_on_commit(void *data, const struct v2_event *e);
void persist_on_rdzv_change(void *data, const struct rdzv_change *c);
/* Starts the batch thread and the loop handles (the last step of opening). Returns: 0, or -1
 * with `err` set. */
int persist_start(struct persist *p, struct mu_buf *err);

#endif
