/* What the persist layer's files share (records.c, snapshot.c, sync.c, recovery.c): the handle
 * and the helpers that cross them. Private to rendezvous/persist/: main.c uses persist.h. */
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
  uint64_t snapshot_bytes; /* the size trigger's floor (0: no size trigger) */
  struct v2_store *s;
  struct rdzv *rdzv; /* NULL: /v1 not served */
  char *rdzv_blob;   /* recovery: the newest whole state found, not yet restored */
  size_t rdzv_len;
  uv_loop_t *loop;
  struct rv_server *srv;
  int lock_fd;
  int fd;             /* the current log segment (written at explicit offsets: see zero_to) */
  uint64_t seg_seq;   /* its sequence number (0: an unnumbered segment of an older musterd) */
  uint64_t seg_first; /* the first index of its name */
  int stopped;
  int64_t written_to; /* bytes of the current segment handed to be written: the offset of the
                       * next write (records in `pending` come after it) */
  /* Zeros written ahead of the log (fsync modes always and batch): an fdatasync() that must
   * grow the file also commits the file system's journal (its size changes; ext4: ~25% more
   * time per sync); writing into zeros already synced does not. Owned by whoever writes the
   * segments: the sync thread while busy, else the loop. */
  int zero_fd;     /* the segment they were written to (-1: none) */
  int64_t zero_to; /* it holds zeros up to this offset, past its last record */

  /* a disk error: writes are refused (read-only) until the records not yet durable are
   * written; a timer retries them */
  int disk_err;      /* -errno of the failure, 0 when writable */
  int nospace;       /* the segment's reserve could not grow (ENOSPC): writes refused, records still
                      * fit in what is left of it */
  int no_reserve;    /* the file system cannot reserve (fallocate() unsupported) */
  int64_t seg_bytes; /* bytes appended to the current segment (written or pending) */
  int seg_dir_unsynced; /* its name is not durable yet: synced before its first record is */
  int64_t reserved_to;  /* its space is reserved up to this offset */
  uint64_t ro_since;
  uv_timer_t retry;
  char ro_msg[256];
  /* a snapshot that failed is tried again from this timer (at snap_retry_at), not when the next
   * write comes: one that would compact a full disk may be the only way writes come back */
  uv_timer_t snap_timer;

  uint64_t appended; /* records appended since start-up */
  uint64_t synced;   /* of which durable */
  uint64_t since_snap;
  uint64_t since_bytes;     /* log bytes appended since the last snapshot (for the size trigger) */
  uint64_t snap_file_bytes; /* the size of the last snapshot file (0: none) */
  struct mu_buf pending;    /* batch mode: records not yet handed to the thread */
  uint64_t batch_first;     /* batch mode: appended when pending was last handed over */
  uint64_t writers;         /* batch mode: records in flight when the last batch ended (how many
                             * clients may write again at once) */
  uint64_t hold_since;      /* uv_hrtime() when the next batch started waiting for them, or 0 */

  /* the sync thread (batch mode); fields below the mutex are shared */
  uv_thread_t thread;
  int thread_started;
  uv_async_t async;
  uv_idle_t kick;   /* active while records wait for a batch or a snapshot is due */
  int handles_open; /* PERSIST_HANDLES while the loop handles below are open */
  int handles_closing;
  uv_mutex_t mu;
  uv_cond_t cond;
  int busy; /* inflight holds a batch the thread is writing */
  int quit;
  int thread_err;
  struct mu_buf inflight;
  uint64_t inflight_last;
  int inflight_fd;             /* the segment it goes to (the old one for the last batch before a
                                * snapshot switches segments) */
  int inflight_failed;         /* it was not written: the retry writes it again, to the same fd */
  int inflight_syncdir;        /* fsync() the data dir with it (a new segment's first batch) */
  int64_t inflight_off;        /* where it goes in that fd (written there again after a failure) */
  int64_t inflight_zero_limit; /* zeros may be written ahead up to here (the reserve), 0: not */
  uint64_t thread_done;        /* records durable according to the thread */

  /* the background snapshot (snapshot.c): the compactor thread writes it from the files. The
   * loop sets snap_index (and reads dir, rdzv) before it starts, and changes none of them
   * while it runs; snap_cancel, snap_done, snap_rc are under the mutex */
  int snap_state; /* SNAP_NONE, SNAP_WAITING (for the old segment's last batch), SNAP_RUNNING */
  uv_thread_t snap_thread;
  int snap_cancel;
  int snap_joinable; /* the compactor ended: joined before the next one starts, or at close */
  int snap_done;
  int snap_rc;
  uint64_t snap_index;     /* the index the snapshot is at */
  uint64_t snap_seq;       /* the first segment after it (the one the loop switched to) */
  uint64_t snap_records;   /* since_snap when it started (given back when it fails) */
  uint64_t snap_bytes;     /* since_bytes when it started (given back when it fails) */
  uint64_t snap_out_bytes; /* the size of the snapshot the compactor wrote (under the mutex) */
  int snap_old_fd;         /* the segment before it, open until its last batch is durable */
  uint64_t snap_old_last;  /* the last record in that segment */
  int64_t snap_old_end;    /* where its records end ... */
  int64_t snap_old_resv;   /* ... and how far its reserve and zeros reach (freed as it closes) */
  uint64_t snap_t0;        /* uv_hrtime() at its start */
  uint64_t snap_retry_at;  /* uv_now() before which a failed snapshot is not retried */
  uint64_t snap_backoff_ms;

  /* /metrics */
  uint64_t m_syncs, m_bytes, m_snapshots, m_max_batch, m_snap_loop;
  uint64_t m_sync_ns; /* the thread's time in write() + fdatasync(), under mu */
  uint64_t m_hold_ns; /* the time batches waited for more writers (hold_batch()) */
  uint64_t m_snap_failures, m_disk_errors, m_refused;
  double m_start_ms, m_snap_ms;
};

/* records.c: files and records */

/* Writes all n bytes at p to fd. Returns: 0, or -errno. */
int persist_write(int fd, const void *p, size_t n);
/* fsync()s the directory `dir` (a rename or a new file in it is durable). Returns: 0, or -errno. */
int persist_sync_dir(const char *dir);
/* Returns: "<dir>/snap-<index, 20 digits>.snap". Caller frees. */
char *persist_snap_path(const char *dir, uint64_t index);

/* A log segment: "wal-<seq>-<first>.log" (20 digits each), numbered 1, 2, ... in the order the
 * log wrote them, whatever the index; or "wal-<first>.log", as musterd named them before (seq 0:
 * they come before every numbered one). `first` is the index of the first store write it may
 * hold (the index after the previous segment's last). A snapshot records the seq of the first
 * segment it does not cover (persist_seg_covered()). */
struct persist_seg {
  uint64_t seq;
  uint64_t first;
};
/* Returns: the segment's path. Caller frees. */
char *persist_wal_path(const char *dir, uint64_t seq, uint64_t first);
/* Returns: 1 when the snapshot at `index` whose first uncovered segment is `next_seq` (0: a
 * snapshot of an older musterd, which covers the unnumbered segments up to its index) holds
 * everything of segment `g`. */
int persist_seg_covered(const struct persist_seg *g, uint64_t index, uint64_t next_seq);

/* The snapshots (by index) and log segments (in log order) of a data dir. */
struct persist_listing {
  uint64_t *snaps;
  struct persist_seg *wals;
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

/* snapshot.c: snapshots and the compactor */

/* The background snapshot. Starts one: the log goes on in a new segment, and the compactor
 * thread writes the store (and the rendezvous) as they are now (at the switch) from the files.
 * The loop thread, with the sync thread idle. Returns: 0, or -errno (nothing started; report
 * with persist_snapshot_failed()). */
int persist_snapshot_start(struct persist *p);
/* Stops the snapshot in progress, if any (waits for the compactor), and removes what it wrote. */
void persist_snapshot_cancel(struct persist *p);
/* Moves the snapshot in progress on (loop thread, after the log's thread reported): starts the
 * compactor once the old segment's last batch is durable, takes its result when it is done. */
void persist_snapshot_poll(struct persist *p);
/* Joins the compactor thread that ended, if any. */
void persist_snapshot_join(struct persist *p);
enum { SNAP_NONE = 0, SNAP_WAITING, SNAP_RUNNING };

/* recovery.c: loading */

/* Loads into p->s (and p->rdzv, when not NULL) the newest snapshot of listing `l` and every
 * segment of `l` it does not cover: steps 2 and 3 of persist_open(), also the compactor's. A
 * torn tail of the last segment is cut off the file with `truncate`, else only reported in
 * `rep`. Sets p->seg_seq, p->seg_first (the segment to append to: the last one read, or the
 * one to create), p->since_snap, p->since_bytes, p->snap_file_bytes.
 * Returns: 0, or -1 with `err` set. */
int persist_load(struct persist *p, struct persist_listing *l, int truncate,
                 struct persist_report *rep, struct mu_buf *err);

/* sync.c: the log writer */

/* Hands the records appended so far to the sync thread (batch mode, thread idle): they go to the
 * current segment, before persist_switch_segment() points the log at the next one. */
void persist_seal_segment(struct persist *p);
/* Makes `fd` (a new, empty segment numbered `seq` whose first index is `first`, with `reserved`
 * bytes of space reserved) the log's segment.
 * Returns: -1 after closing the old one (`close_old`), else the old fd (the caller closes it
 * once persist_segment_done() says its records are durable). */
int persist_switch_segment(struct persist *p, int fd, uint64_t seq, uint64_t first, int close_old,
                           int64_t reserved);
/* Returns: 1 when the record `last` (a count of appended records) is durable. */
int persist_segment_done(struct persist *p, uint64_t last);
/* Reserves disk space for segment `fd` from `off` to off + len, without changing its size.
 * Returns: 0, -EOPNOTSUPP (the file system cannot), or -errno (-ENOSPC). */
int persist_reserve(int fd, int64_t off, int64_t len);
/* Gives back the disk space of segment `fd` from `from` (where its records end) to `to` (the
 * zeros written ahead and the reserve): a segment the log has left holds no more than its
 * records, so that a full disk has room for the snapshot that compacts it. Best effort. */
void persist_release(int fd, int64_t from, int64_t to);
/* How far the current segment's records and reserve (which holds its zeros) reach. */
int64_t persist_reach(const struct persist *p);
#define PERSIST_RESERVE_CHUNK ((int64_t)8 << 20) /* reserved at a time ahead of the log */

/* Closes the segment before the snapshot in progress once its last batch is durable, then
 * moves the snapshot on (persist_snapshot_poll()). */
void persist_close_old_segment(struct persist *p);
#define PERSIST_HANDLES 4 /* kick, async, retry, snap_timer */
/* Starts the next piece of work that is due: a snapshot (by count, by size, or to compact a
 * full disk), the next batch. */
void persist_maybe_work(struct persist *p);

/* A snapshot failed with `err`: reported (log, /metrics) and retried after a back-off. */
void persist_snapshot_failed(struct persist *p, int err);

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
