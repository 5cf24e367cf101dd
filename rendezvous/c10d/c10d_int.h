/* What the c10d layer's files share (private to rendezvous/c10d/): the module, a connection,
 * a wait. conn.c owns connections and their bytes, ops.c the queries, wait.c the waits and
 * watch_key, http.c the HTTP view, /metrics and registration.
 */
#ifndef MUSTERD_C10D_C10D_INT_H
#define MUSTERD_C10D_C10D_INT_H

#include <stdint.h>

#include <uv.h>

#include "allow.h"
#include "buf.h"
#include "c10d.h"
#include "frame.h"
#include "htab.h"
#include "http.h"
#include "list.h"
#include "store.h"

#define C10D_READ_BUF (64 * 1024)
/* Answers a connection may have unsent before it stops being read (as HTTP's RV_OUT_PAUSE). */
#define C10D_OUT_PAUSE (64 * 1024)
/* How often parked connections try their write again (a disk error, a big GET in slices). */
#define C10D_PARK_RETRY_MS 10
/* Fairness: the frames one connection runs in one loop turn; the rest of its pipelined input
 * waits for the next turn, after the other clients' I/O (redis's max-requests-per-event). */
#define C10D_FRAMES_PER_TURN 64

struct c10d_wait;

/* One client address's waits (C10D_MAX_WAIT_KEYS_PER_ADDRESS). */
struct c10d_addr {
  struct mu_hnode h; /* key: the address (part of the allocation) */
  unsigned conns;
  uint64_t wait_keys;
};

/* The module "c10d": one per server. */
struct c10d {
  struct rv_server *srv;
  struct v2_store *store;
  struct c10d_config cfg;
  struct c10d_limits lim;
  struct c10d_allow allow; /* --c10d-allow: the peers admitted (n 0: all) */
  uv_tcp_t listener;
  int listening, closing;
  int port;
  char host[64];
  struct mu_list conns;  /* struct c10d_conn.link */
  size_t conns_closing;  /* of them, closed and not yet freed */
  struct mu_list parked; /* struct c10d_conn.park_link: a write waiting for the store */
  uv_timer_t sweep;      /* deadlines, once a second */
  uv_timer_t retry;      /* parked connections, every C10D_PARK_RETRY_MS while any */
  uv_timer_t gc;         /* forgets idle torchrun runs (gc.c) */
  uv_idle_t turn;        /* runs the next share of the connections on `ready`, once a turn */
  struct mu_list ready;  /* struct c10d_conn.ready_link: frames left over from their turn */
  struct mu_htab runs;   /* struct c10d_run_seen by run id: its last write */
  int gc_scanned;        /* the runs in the store at start-up are in `runs` */
  uint64_t runs_forgotten, keys_forgotten;
  int timers_closed;
  unsigned handles;      /* open handles (listener, timers, connections): freed at 0 once closing */
  struct mu_htab addrs;  /* struct c10d_addr by address */
  struct mu_htab queues; /* struct c10d_queue by queue path: items in push order (queue.c) */
  uint64_t wait_keys;    /* keys waited on now (WAIT and watch_key), all connections */
  uint64_t watch_keys;   /* watch_key subscriptions open */
  uint64_t wait_bytes;   /* what the waits and watch_keys hold, in the memory budget (wait.c) */
  struct mu_buf path;    /* scratch: a store path */
  struct mu_buf path2;
  /* watch_key: the value a c10d write replaces, for its KEY_UPDATED (only while watched) */
  struct mu_buf stash_key, stash_val;
  int stash_set;
  char read_buf[C10D_READ_BUF];
  /* counters for /metrics */
  uint64_t accepted, refused;
  uint64_t queries[C10D_OP_COUNT];
  uint64_t closed[C10D_R_COUNT];
  uint64_t by_proto[3];
  uint64_t waits_woken, parked_total, yielded_total, evicted;
};

enum c10d_conn_flags {
  C10D_CONN_CLOSING = 1 << 0,   /* uv_close called */
  C10D_CONN_IN_READ = 1 << 1,   /* processing input: flush once at the end */
  C10D_CONN_PAUSED = 1 << 2,    /* not read: unsent answers over C10D_OUT_PAUSE */
  C10D_CONN_PARKED = 1 << 3,    /* not read: a write waits for the store */
  C10D_CONN_READING = 1 << 4,   /* uv_read_start in effect */
  C10D_CONN_VALIDATED = 1 << 5, /* V2: the handshake came */
  C10D_CONN_YIELDED = 1 << 6,   /* not read: its turn's share of frames ran, more wait (ready) */
  C10D_CONN_SPOKE = 1 << 7,     /* a whole frame came (until then: --header-timeout-ms, evicted
                                   first at --max-connections) */
};

struct c10d_conn {
  uv_tcp_t tcp;
  struct c10d *m;
  struct mu_list_node link;       /* on m->conns */
  struct mu_list_node park_link;  /* on m->parked while C10D_CONN_PARKED */
  struct mu_list_node ready_link; /* on m->ready while C10D_CONN_YIELDED */
  unsigned flags;
  enum c10d_proto proto;
  struct mu_buf in; /* input not processed yet: a frame's start at pos */
  size_t pos;       /* the frame being parsed starts here */
  size_t counted;   /* bytes of `in` counted against the server's body bounds */
  size_t held;      /* capacity of in, out, wbuf and the frame's spans counted in the server's
                     * memory budget */
  struct c10d_frame frame;
  uint64_t frame_since; /* uv_now() when the unfinished frame's first byte came; 0 none */
  uint64_t accepted_at; /* uv_now() at accept */
  struct mu_buf out;    /* answers not handed to the kernel */
  struct mu_buf wbuf;   /* being written */
  uv_write_t wreq;
  int writing;
  uint64_t write_since;
  uint64_t out_need; /* the barrier's sequence number `out` waits for */
  struct rv_hold hold;
  struct c10d_wait *wait;  /* the WAIT in progress, or NULL */
  struct mu_list watches;  /* watch_key subscriptions (struct c10d_watch.link) */
  struct rv_addr *addr;    /* the server's per-address share */
  struct c10d_addr *waddr; /* this layer's (waits) */
  char peer[64];           /* its client: the address, or its prefix (rv_server_client_key) */
};

/* conn.c */
/* Counts `n` more bytes `c` makes musterd hold (`what`, for the log) in the server's one memory
 * budget, with HTTP's connections and its client's. Returns: 0, or -1 after closing `c`
 * (budget, with a log line naming the limit passed). */
int c10d_budget_take(struct c10d_conn *c, size_t n, const char *what);
/* Gives back `n` bytes taken by c10d_budget_take(). */
void c10d_budget_put(struct c10d_conn *c, size_t n);
/* Closes `c` for `why` (counted once). */
void c10d_conn_close(struct c10d_conn *c, enum c10d_reason why);
/* Appends answer bytes (stamped for the barrier). Returns: 0, or -1 when `c` was closed (its
 * unsent answers over --max-output-bytes). */
int c10d_out(struct c10d_conn *c, const void *p, size_t n);
int c10d_out_u8(struct c10d_conn *c, uint8_t v);
int c10d_out_u32(struct c10d_conn *c, uint32_t v);
int c10d_out_u64(struct c10d_conn *c, uint64_t v);
/* A value or a key: its u64 length, then its bytes. */
int c10d_out_bytes(struct c10d_conn *c, const void *p, size_t n);
/* Sends what `c` has queued, unless it is inside its own input processing (then at its end). */
void c10d_flush(struct c10d_conn *c);
/* Parks `c` until the store takes writes (its frame stays; it is processed again then). */
void c10d_park(struct c10d_conn *c);
int c10d_listen_on(struct c10d *m, const char *host, int port);
void c10d_close_all(struct c10d *m);
/* The module's shutdown: the listener, the timers, every connection. */
void c10d_shutdown(struct c10d *m);
/* One more (one fewer) handle of the module open; the last one's close frees it. */
void c10d_ref(struct c10d *m);
void c10d_unref(struct c10d *m);

/* http.c */
/* Frees the module (every handle closed). */
void c10d_free(struct c10d *m);

/* gc.c: forgetting the keys of torchrun runs that stopped writing (--c10d-run-gc-seconds) */
/* The torchrun run key k[0..n) belongs to (torch.rendezvous.<run>, ...<run>.<round>/...).
 * Returns: 1 with *run (into k), *run_len and *round (-1: the state key, or no round), else 0. */
int c10d_key_run(const char *k, size_t n, const char **run, size_t *run_len, long *round);
/* A c10d write of key k[0..n): its run was written now. */
void c10d_gc_touch(struct c10d *m, const void *k, size_t n);
/* Returns: ms since the run's last write seen (since musterd started, for an older run), or -1
 * when it is not known. */
int64_t c10d_gc_idle_ms(struct c10d *m, const char *run, size_t run_len);
/* Starts the timer (when gc_ms > 0); frees the table at shutdown. */
void c10d_gc_start(struct c10d *m);
void c10d_gc_release(struct c10d *m);

/* ops.c */
/* Runs the complete frame at c->in.data + c->pos. Returns: 1 done, 0 parked (run it again
 * later), -1 the connection was closed. */
int c10d_dispatch(struct c10d_conn *c);
/* Appends the store path of c10d key k[0..n) under `dir` to `b` (cleared first).
 * Returns: b's string. */
const char *c10d_key_path(struct mu_buf *b, const char *dir, const void *k, size_t n);
/* Decodes a node name made by c10d_key_path() into `out` (cleared first). Returns: 0, or -1
 * when `name` is not one. */
int c10d_key_decode(const char *name, size_t n, struct mu_buf *out);
/* Returns: the node of key path `path` when it is a key (not a dir), else NULL. */
struct v2_node *c10d_lookup_key(struct c10d *m, const char *path);
/* Returns: the items queued under queue path `qpath`. */
size_t c10d_queue_len(struct c10d *m, const char *qpath);
/* Reads s[0..n) as std::stoll does (blanks, a sign, digits, anything after).
 * Returns: 0 with `*out` set, or -1 when it is not a number or overflows. */
int c10d_parse_ll(const char *s, size_t n, int64_t *out);

/* queue.c: each queue's items in push order, for QUEUE_POP in O(1) */
/* QUEUE_PUSH made item `item_key` in the queue at `qpath`. */
void c10d_queue_pushed(struct c10d *m, const char *qpath, const char *item_key);
/* Returns: the oldest item of the queue at `qpath` (its dir `d`, with items), taken out of the
 * order (the caller deletes it), or NULL when it holds none. */
struct v2_node *c10d_queue_oldest(struct c10d *m, const char *qpath, const struct v2_node *d);
/* Frees the order of the queue at `qpath` once it holds nothing. */
void c10d_queue_forget(struct c10d *m, const char *qpath);
void c10d_queues_release(struct c10d *m);

/* wait.c */
/* WAIT for the frame's keys: STOP_WAITING now, or once every key exists. Returns: 0, or -1
 * when `c` was closed (a bound). */
int c10d_wait_start(struct c10d_conn *c);
/* BARRIER: parks `c` until the counter at key path `path` reaches `need`, then answers
 * STOP_WAITING (CANCEL_WAIT drops it like a WAIT). Returns: 0, or -1 when `c` was closed. */
int c10d_barrier_wait(struct c10d_conn *c, const char *path, int64_t need);
/* Drops the connection's WAIT without an answer. */
void c10d_wait_cancel(struct c10d_conn *c);
/* watch_key (legacy): registers key k[0..n) on `c`. Returns: 0, or -1 when closed. */
int c10d_watch_add(struct c10d_conn *c, const void *k, size_t n);
/* Drops every watch_key of `c`. */
void c10d_watch_clear(struct c10d_conn *c);
/* Before a c10d write of key path `path`: keeps its old value for watch_key's answer. */
void c10d_watch_stash(struct c10d *m, const char *path);
void c10d_watch_unstash(struct c10d *m);
/* The per-address record of `peer` (taken, one more connection), and its release. */
struct c10d_addr *c10d_addr_take(struct c10d *m, const char *peer);
void c10d_addr_put(struct c10d *m, struct c10d_addr *a);

#endif
