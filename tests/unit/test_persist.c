/* Durability (rendezvous/persist/persist.h): what a store logged comes back after a restart, torn
 * tails are truncated, damage in the middle refuses to start. */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uv.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "http.h"
#include "musterd/embed.h"
#include "persist.h"
#include "rdzv.h"
#include "store.h"
#include "task.h"
#include "v1.h"
#include "v2.h"
#include "wal.h"

struct world {
  uv_loop_t loop;
  struct v2_store *s;
  struct rdzv *rv; /* NULL: /v1 not logged */
  struct persist *p;
  struct persist_report rep;
  struct mu_buf errbuf;
  const char *err;  /* what persist_open() said, "" when it opened */
  uv_timer_t alive; /* keeps the loop alive (the persist handles do not), as a server would */
};

static void noop_timer(uv_timer_t *t)
{
  (void)t;
}

/* The error text of the next call: the buffer emptied first. */
static struct mu_buf *msgbuf(struct mu_buf *b)
{
  mu_buf_clear(b);
  return b;
}
/* Opens `dir` with a store, and a rendezvous with `rdzv`; a snapshot every `every` records or
 * past `bytes` of log. Returns: 0, or -1 with w->err. */
static int world_open_with(struct world *w, const char *dir, enum persist_fsync mode,
                           uint64_t every, uint64_t bytes, int rdzv)
{
  memset(w, 0, sizeof(*w));
  uv_loop_init(&w->loop);
  w->s = v2_store_new(&w->loop);
  w->rv = rdzv ? rdzv_new(&w->loop, 0) : NULL;
  mu_buf_init(&w->errbuf, 4096);
  uv_timer_init(&w->loop, &w->alive);
  uv_timer_start(&w->alive, noop_timer, 1000, 1000);
  w->p = persist_open(dir, mode, every, bytes, w->s, w->rv, &w->loop, &w->rep, &w->errbuf);
  w->err = mu_buf_str(&w->errbuf);
  return w->p != NULL ? 0 : -1;
}

static int world_open(struct world *w, const char *dir, enum persist_fsync mode, uint64_t every)
{
  return world_open_with(w, dir, mode, every, 0, 0);
}

static void world_close(struct world *w, int graceful)
{
  if (w->p != NULL && graceful)
    ASSERT_EQ(persist_stop(w->p), 0);
  persist_close(w->p);
  v2_store_free(w->s);
  if (w->rv != NULL)
    rdzv_free(w->rv, NULL, NULL);
  uv_close((uv_handle_t *)&w->alive, NULL);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  persist_free(w->p);
  persist_report_release(&w->rep);
  mu_buf_release(&w->errbuf);
  ASSERT_EQ(uv_loop_close(&w->loop), 0);
}

static char *tmpdir(void)
{
  char tmpl[] = "/tmp/mu-test-persist.XXXXXX";
  char *d = mkdtemp(tmpl);
  ASSERT(d != NULL);
  return mu_strdup(d);
}

static void rmdir_all(const char *dir)
{
  char *cmd = mu_asprintf("rm -rf '%s'", dir);
  ASSERT_EQ(system(cmd), 0);
  mu_free(cmd);
}

/* The whole visible state: the recursive GET of "/" with the index, and every event's JSON. */
static char *state_of(struct v2_store *s)
{
  struct mu_buf b = MU_BUF_INIT((size_t)1 << 30);
  struct v2_err err = {0, NULL, 0};
  mu_buf_printf(&b, "index=%llu\n", (unsigned long long)s->index);
  ASSERT_EQ(v2_store_get(s, "/", 1, 1, &b, &err), 0);
  const struct v2_event_history *h = &s->history;
  for (unsigned i = 0; i < h->count; i++) {
    const struct v2_event *e = h->ring[(h->front + i) % h->cap];
    size_t len;
    mu_buf_printf(&b, "%llu %d %d %s", (unsigned long long)e->index, e->action, e->refresh,
                  v2_store_event_json(s, e, &len));
  }
  return mu_buf_detach(&b);
}

static void w_set(struct v2_store *s, const char *key, const char *value, int64_t expire)
{
  struct v2_write w = {key, value, value ? strlen(value) : 0, value == NULL, expire, 0, NULL, 0};
  struct v2_err err = {0, NULL, 0};
  ASSERT(v2_store_set(s, &w, &err) != NULL);
}

/* A mix of every kind of write. */
static void workload(struct v2_store *s)
{
  struct v2_err err = {0, NULL, 0};
  int64_t later = v2_now_ns() + (int64_t)3600 * 1000000000;
  w_set(s, "/a/b/c", "1", 0);
  w_set(s, "/a/b/d", "two", later);
  w_set(s, "/dir", NULL, 0);
  w_set(s, "/a/b/c", "1bis", 0);
  struct v2_write w = {"/q", "queued", 6, 0, 0, 0, NULL, 0};
  ASSERT(v2_store_create(s, &w, 1, &err) != NULL); /* POST: in-order key */
  struct v2_write u = {"/a/b/c", "updated", 7, 0, later, 0, NULL, 0};
  ASSERT(v2_store_update(s, &u, &err) != NULL);
  struct v2_write c = {"/a/b/c", "swapped", 7, 0, 0, 0, "updated", 0};
  ASSERT(v2_store_cas(s, &c, &err) != NULL);
  struct v2_write r = {"/a/b/d", NULL, 0, 0, later + 5, 1, NULL, 0};
  ASSERT(v2_store_set(s, &r, &err) != NULL); /* refresh */
  w_set(s, "/gone/x", "x", 0);
  ASSERT(v2_store_delete(s, "/gone", 1, 1, &err) != NULL);
  w_set(s, "/cad", "v", 0);
  ASSERT(v2_store_cad(s, "/cad", "v", 0, &err) != NULL);
  w_set(s, "/_hidden", "h", 0);
  w_set(s, "/bin", "a\0b\n\"\xff", 0);
  /* failures are not logged */
  struct v2_write bad = {"/a/b/c", "no", 2, 0, 0, 0, "wrong", 0};
  ASSERT(v2_store_cas(s, &bad, &err) == NULL);
  v2_err_release(&err);
}

static void roundtrip(enum persist_fsync mode, uint64_t every, int graceful)
{
  char *dir = tmpdir();
  struct world w;
  ASSERT_EQ(world_open(&w, dir, mode, every), 0);
  ASSERT_EQ(w.rep.index, 0);
  workload(w.s);
  /* let batch mode sync (the check handle runs after the loop's poll) */
  for (int i = 0; i < 50; i++)
    uv_run(&w.loop, UV_RUN_NOWAIT);
  char *before = state_of(w.s);
  world_close(&w, graceful);

  struct world w2;
  ASSERT_EQ(world_open(&w2, dir, mode, every), 0);
  char *after = state_of(w2.s);
  ASSERT_STR_EQ(after, before);
  ASSERT_EQ(w2.rep.keys, 5); /* /a/b/c /a/b/d /q/... /_hidden /bin */
  ASSERT_EQ(w2.rep.expired, 0);
  ASSERT_EQ(w2.rep.warning.len, 0);
  /* keep going on the recovered store, and once more */
  w_set(w2.s, "/after", "restart", 0);
  char *before2 = state_of(w2.s);
  world_close(&w2, graceful);
  struct world w3;
  ASSERT_EQ(world_open(&w3, dir, mode, every), 0);
  char *after2 = state_of(w3.s);
  ASSERT_STR_EQ(after2, before2);
  world_close(&w3, 1);
  mu_free(before);
  mu_free(after);
  mu_free(before2);
  mu_free(after2);
  rmdir_all(dir);
  mu_free(dir);
}

TEST(persist__roundtrip_log_only)
{
  roundtrip(PERSIST_FSYNC_ALWAYS, 0, 0);
}

TEST(persist__roundtrip_snapshots)
{
  roundtrip(PERSIST_FSYNC_OFF, 3, 0);
}

TEST(persist__roundtrip_batch_graceful)
{
  roundtrip(PERSIST_FSYNC_BATCH, 4, 1);
}

TEST(persist__expired_while_down)
{
  char *dir = tmpdir();
  struct world w;
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  w_set(w.s, "/soon", "x", v2_now_ns() + 50 * 1000000);
  w_set(w.s, "/stays", "y", v2_now_ns() + (int64_t)3600 * 1000000000);
  world_close(&w, 0);
  usleep(100 * 1000);
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT_EQ(w.rep.expired, 1);
  ASSERT(v2_store_lookup(w.s, "/soon") == NULL);
  ASSERT(v2_store_lookup(w.s, "/stays") != NULL);
  ASSERT_EQ(w.s->index, 3);
  const struct v2_event *last = w.s->history.ring[(w.s->history.front + 2) % w.s->history.cap];
  ASSERT_EQ(last->action, V2_EV_EXPIRE);
  /* a write after it goes right after it in the log (with --fsync always the expiry, logged at
   * the start, was written with zeros ahead of it) */
  w_set(w.s, "/after", "z", 0);
  world_close(&w, 0);
  /* the expiry was logged: a second restart sees the same index and nothing to expire */
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT_EQ(w.rep.expired, 0);
  ASSERT_EQ(w.rep.warning.len, 0);
  ASSERT_EQ(w.s->index, 4);
  ASSERT(v2_store_lookup(w.s, "/after") != NULL);
  world_close(&w, 0);
  rmdir_all(dir);
  mu_free(dir);
}

static unsigned char *slurp(const char *path, size_t *n)
{
  FILE *f = fopen(path, "rb");
  ASSERT(f != NULL);
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = mu_malloc((size_t)sz + 1);
  ASSERT_EQ(fread(b, 1, (size_t)sz, f), (size_t)sz);
  fclose(f);
  *n = (size_t)sz;
  return b;
}

static void spit(const char *path, const unsigned char *b, size_t n)
{
  FILE *f = fopen(path, "wb");
  ASSERT(f != NULL);
  ASSERT_EQ(fwrite(b, 1, n, f), n);
  fclose(f);
}

/* Reads file `path` (*n bytes) and starts reader `r` on it. Returns: the bytes; caller frees. */
static unsigned char *slurp_reader(const char *path, struct wal_reader *r, size_t *n)
{
  unsigned char *data = slurp(path, n);
  wal_reader_init(r, data, *n);
  return data;
}

/* Opens a new data dir into `w` (fsync always, no snapshot by count) and sets /k `n` times.
 * Returns: the dir. Caller frees. */
static char *dir_with_writes(struct world *w, int n)
{
  char *dir = tmpdir();
  ASSERT_EQ(world_open(w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  for (int i = 0; i < n; i++)
    w_set(w->s, "/k", "value", 0);
  return dir;
}

/* Returns: the path of log segment `seq` (0: named as older musterds did) starting at `first`.
 * Caller frees. */
static char *seg_path(const char *dir, int seq, int first)
{
  if (seq == 0)
    return mu_asprintf("%s/wal-%020d.log", dir, first);
  return mu_asprintf("%s/wal-%020d-%020d.log", dir, seq, first);
}

TEST(persist__torn_tail_every_offset)
{
  char *dir = tmpdir();
  struct world w;
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  for (int i = 0; i < 4; i++)
    w_set(w.s, i == 3 ? "/last" : "/k", "value", 0);
  world_close(&w, 0);
  char *log = seg_path(dir, 1, 1);
  size_t n = 0;
  /* find the last record */
  struct wal_reader r;
  unsigned char *orig = slurp_reader(log, &r, &n);
  const unsigned char *p;
  size_t len, last = 0;
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(wal_read(&r, &p, &len), WAL_RECORD);
  last = r.off;
  ASSERT_EQ(wal_read(&r, &p, &len), WAL_RECORD);
  size_t end = r.off;
  ASSERT(n > end); /* the zeros written ahead of the log follow its records */
  for (size_t i = end; i < n; i++)
    ASSERT_EQ(orig[i], 0);
  /* the last record cut at every offset, the file ending there (a torn append) or going on
   * with zeros (a torn write into the zeros written ahead): torn, never corrupt */
  unsigned char *cutz = mu_calloc(1, n);
  for (int zeros = 0; zeros < 2; zeros++) {
    for (size_t cut = last + 1; cut < end; cut++) {
      memcpy(cutz, orig, cut);
      spit(log, cutz, zeros ? n : cut);
      ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
      ASSERT(strstr(mu_buf_str(&w.rep.warning), "torn tail") != NULL);
      ASSERT_EQ(w.s->index, 3);
      ASSERT(v2_store_lookup(w.s, "/last") == NULL);
      world_close(&w, 0);
      struct stat st;
      ASSERT_EQ(stat(log, &st), 0);
      ASSERT_EQ(st.st_size, (off_t)last); /* truncated to the last whole record */
    }
  }
  /* a write whose later sectors reached the disk and earlier ones did not: zeros, then bytes */
  size_t junk = end - end % 512 + 1024;
  ASSERT(junk + 100 < n);
  memcpy(cutz, orig, end);
  memset(cutz + junk, 'x', 100);
  spit(log, cutz, n);
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT(strstr(mu_buf_str(&w.rep.warning), "torn tail") != NULL);
  ASSERT_EQ(w.s->index, 4);
  world_close(&w, 0);
  struct stat st;
  ASSERT_EQ(stat(log, &st), 0);
  ASSERT_EQ(st.st_size, (off_t)end);
  /* but a damaged record before the last, zeros after them all: damage, refused */
  memcpy(cutz, orig, n);
  cutz[last - 3] ^= 0x20;
  spit(log, cutz, n);
  ASSERT(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0) != 0);
  ASSERT(strstr(w.err, "corrupt") != NULL);
  world_close(&w, 0);
  mu_free(cutz);
  /* the whole log and its zeros: a clean end, no warning; cut to the records, the next write
   * right after them */
  spit(log, orig, n);
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT_EQ(w.rep.warning.len, 0);
  ASSERT_EQ(w.s->index, 4);
  ASSERT_EQ(stat(log, &st), 0);
  ASSERT_EQ(st.st_size, (off_t)end);
  w_set(w.s, "/after", "value", 0);
  world_close(&w, 0);
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT_EQ(w.rep.warning.len, 0);
  ASSERT_EQ(w.s->index, 5);
  ASSERT(v2_store_lookup(w.s, "/after") != NULL);
  world_close(&w, 0);
  mu_free(orig);
  mu_free(log);
  rmdir_all(dir);
  mu_free(dir);
}

TEST(persist__corruption_refuses)
{
  struct world w;
  char *dir = dir_with_writes(&w, 5);
  world_close(&w, 0);
  char *log = seg_path(dir, 1, 1);
  size_t n = 0;
  struct wal_reader r;
  unsigned char *orig = slurp_reader(log, &r, &n);
  const unsigned char *p;
  size_t len;
  ASSERT_EQ(wal_read(&r, &p, &len), WAL_RECORD);
  ASSERT_EQ(wal_read(&r, &p, &len), WAL_RECORD);
  size_t third = r.off;
  orig[third + 30] ^= 0x10; /* inside the third of five records */
  spit(log, orig, n);
  ASSERT(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0) != 0);
  ASSERT(strstr(w.err, log) != NULL);
  char want[64];
  snprintf(want, sizeof(want), "byte offset %zu", third);
  ASSERT(strstr(w.err, want) != NULL);
  world_close(&w, 0);
  mu_free(orig);
  mu_free(log);
  rmdir_all(dir);
  mu_free(dir);
}

TEST(persist__dir_locked)
{
  char *dir = tmpdir();
  struct world a, b;
  ASSERT_EQ(world_open(&a, dir, PERSIST_FSYNC_OFF, 0), 0);
  ASSERT(world_open(&b, dir, PERSIST_FSYNC_OFF, 0) != 0);
  ASSERT(strstr(b.err, "in use by another musterd") != NULL);
  world_close(&b, 0);
  world_close(&a, 0);
  rmdir_all(dir);
  mu_free(dir);
}

/* ---- the native rendezvous state (rdzv.h rdzv_encode/rdzv_restore) ---- */

/* The session of the latest join answered (issue 33 item 7), and node-b's of rz_state(). */
static char rz_session[RDZV_SESSION_HEX + 1], rz_b_session[RDZV_SESSION_HEX + 1];

static void rz_answer(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  *(int *)w->data = a->err == 0 ? 1 : -1;
  if (a->session != NULL)
    snprintf(rz_session, sizeof(rz_session), "%s", a->session);
}

static void rz_free_done(void *data)
{
  *(int *)data = 1;
}

static void rz_free(uv_loop_t *loop, struct rdzv *rv)
{
  int done = 0;
  rdzv_free(rv, rz_free_done, &done);
  while (!done && uv_run(loop, UV_RUN_ONCE) != 0) {
  }
  ASSERT_EQ(done, 1);
}

/* A run with a closed round of 2 and some KV, an ended run; returns the encoded state. */
static struct mu_buf rz_state(uv_loop_t *loop)
{
  struct rdzv *rv = rdzv_new(loop, 0);
  struct rdzv_join_req req = {"node-a", "10.0.0.1", 2, 29500, 0, {2, 2, -1, -1, 5000, -1}, NULL};
  int fa = 0, fb = 0, fc = 0;
  struct rdzv_wait wa = RDZV_WAIT_INIT(rz_answer, &fa);
  struct rdzv_wait wb = RDZV_WAIT_INIT(rz_answer, &fb);
  struct rdzv_wait wc = RDZV_WAIT_INIT(rz_answer, &fc);
  struct mu_buf msg = MU_BUF_INIT(4096);
  ASSERT_EQ(rdzv_join(rv, "job", &req, &wa, msgbuf(&msg)), 0);
  req.node_id = "node-b";
  req.addr = "10.0.0.2";
  ASSERT_EQ(rdzv_join(rv, "job", &req, &wb, msgbuf(&msg)), 0);
  ASSERT(fa == 1 && fb == 1);
  ASSERT_EQ(strlen(rz_session), RDZV_SESSION_HEX); /* node-b's: answered after node-a */
  memcpy(rz_b_session, rz_session, sizeof(rz_b_session));
  uint64_t version = 0;
  ASSERT_EQ(rdzv_kv_set(rv, "job", "bin", "a\0b", 3, &version), 0);
  ASSERT_EQ(rdzv_kv_set(rv, "job", "gone", "x", 1, &version), 0);
  ASSERT_EQ(rdzv_kv_del(rv, "job", "gone"), 0);
  struct rdzv_join_req one = {"solo", "h", 1, 1, 0, {1, 1, -1, -1, -1, -1}, NULL};
  ASSERT_EQ(rdzv_join(rv, "ended", &one, &wc, msgbuf(&msg)), 0);
  ASSERT_EQ(rdzv_end(rv, "ended", 1, "stopped by the test"), 0);
  struct mu_buf b = MU_BUF_INIT(1 << 20);
  ASSERT_EQ(rdzv_encode(rv, &b), 0);
  rz_free(loop, rv);
  mu_buf_release(&msg);
  return b;
}

TEST(persist__rdzv_roundtrip)
{
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct mu_buf b = rz_state(&loop);
  struct rdzv *rv = rdzv_new(&loop, 0);
  ASSERT_EQ(rdzv_restore(rv, b.data, b.len), 0);
  struct rdzv_run *run = rdzv_find(rv, "job");
  ASSERT(run != NULL);
  struct rdzv_run_info info;
  rdzv_run_info(run, &info);
  ASSERT_EQ(info.round, 1);
  ASSERT_EQ(info.round_state, RDZV_ROUND_ACTIVE);
  ASSERT_EQ(info.nnodes, 2);
  ASSERT_EQ(info.lease_ttl_ms, 5000);
  struct rdzv_member m;
  rdzv_round_member(info.last_round, 1, &m);
  ASSERT_STR_EQ(m.node_id, "node-b");
  ASSERT_STR_EQ(m.addr, "10.0.0.2");
  ASSERT_EQ(m.rank_offset, 2);
  ASSERT_EQ(info.last_round->world_size, 4);
  /* each member keeps its session across the restart: only node-b's speaks for node-b */
  struct mu_buf err = MU_BUF_INIT(4096);
  ASSERT_EQ(rdzv_session_check(rv, "job", "node-b", rz_b_session, 0, &err), 0);
  ASSERT_EQ(rdzv_session_check(rv, "job", "node-a", rz_b_session, 0, &err), RDZV_EWRONG_SESSION);
  ASSERT_EQ(rdzv_session_check(rv, "job", "node-b", NULL, 0, &err), RDZV_EWRONG_SESSION);
  mu_buf_release(&err);
  struct rdzv_answer a;
  ASSERT_EQ(rdzv_heartbeat(rv, "job", "node-b", &a), 0);
  ASSERT_STR_EQ(a.state, "active");
  ASSERT_EQ(rdzv_kv_get(rv, "job", "bin", &a, 0, NULL), 0);
  ASSERT_EQ(a.value_len, 3);
  ASSERT(memcmp(a.value, "a\0b", 3) == 0);
  ASSERT_EQ(rdzv_kv_get(rv, "job", "gone", &a, 0, NULL), RDZV_ENO_SUCH_KEY);
  struct rdzv_run *ended = rdzv_find(rv, "ended");
  ASSERT(ended != NULL);
  rdzv_run_info(ended, &info);
  ASSERT_EQ(info.state, RDZV_RUN_SHUT);
  ASSERT_STR_EQ(info.reason, "stopped by the test");
  /* the next KV version continues after the restored ones */
  uint64_t version = 0;
  ASSERT_EQ(rdzv_kv_set(rv, "job", "next", "1", 1, &version), 0);
  ASSERT_EQ(version, 3);
  /* encoding the restored state gives a blob that restores the same way */
  struct mu_buf b2 = MU_BUF_INIT(1 << 20);
  ASSERT_EQ(rdzv_encode(rv, &b2), 0);
  rz_free(&loop, rv);
  rv = rdzv_new(&loop, 0);
  ASSERT_EQ(rdzv_restore(rv, b2.data, b2.len), 0);
  ASSERT_EQ(rdzv_restore(rv, b2.data, b2.len), -1); /* only into an empty rendezvous */
  rz_free(&loop, rv);
  mu_buf_release(&b);
  mu_buf_release(&b2);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* The change hook of rz_changes: every change's record body, each as u32 length + bytes. */
static void rz_collect(void *data, const struct rdzv_change *c)
{
  struct mu_buf *log = data;
  struct mu_buf body = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(rdzv_encode_change(c, &body), 0);
  uint32_t n = (uint32_t)body.len;
  mu_buf_append(log, &n, sizeof(n));
  mu_buf_append(log, body.data, body.len);
  mu_buf_release(&body);
}

/* Applies every body of `log` to `rv`. Returns: how many applied, or -1 at the first refused. */
static int rz_replay(struct rdzv *rv, const struct mu_buf *log)
{
  int applied = 0;
  for (size_t off = 0; off < log->len;) {
    uint32_t n;
    memcpy(&n, log->data + off, sizeof(n));
    if (rdzv_apply_change(rv, log->data + off + 4, n) != 0)
      return -1;
    off += 4 + n;
    applied++;
  }
  return applied;
}

TEST(persist__rdzv_changes_replay_to_the_same_state)
{
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct mu_buf b = rz_state(&loop);
  struct rdzv *rv = rdzv_new(&loop, 0);
  ASSERT_EQ(rdzv_restore(rv, b.data, b.len), 0);
  struct mu_buf log = MU_BUF_INIT(MU_BUF_UNBOUNDED), msg = MU_BUF_INIT(4096);
  rdzv_set_change_hook(rv, rz_collect, &log);
  /* every kind of change: KV set, overwrite, delete; a member lost (round broken); a member
   * re-joining; a new run whose round closes, then ends and is forgotten (GC) */
  uint64_t version = 0;
  ASSERT_EQ(rdzv_kv_set(rv, "job", "bin", "new", 3, &version), 0);
  ASSERT_EQ(rdzv_kv_set(rv, "job", "k2", "v2", 2, &version), 0);
  ASSERT_EQ(rdzv_kv_add(rv, "job", "ctr", 5, NULL), 0);
  ASSERT_EQ(rdzv_kv_del(rv, "job", "k2"), 0);
  ASSERT_EQ(rdzv_leave(rv, "job", "node-b", 1, "crashed"), 0);
  int fa = 0, f1 = 0, f2 = 0;
  struct rdzv_wait wa = RDZV_WAIT_INIT(rz_answer, &fa);
  struct rdzv_join_req req = {"node-a", "10.9.9.9", 4, 29501, 0, {2, 2, -1, -1, 5000, -1}, NULL};
  ASSERT_EQ(rdzv_join(rv, "job", &req, &wa, msgbuf(&msg)), 0);
  rdzv_wait_cancel(&wa);
  struct rdzv_wait w1 = RDZV_WAIT_INIT(rz_answer, &f1), w2 = RDZV_WAIT_INIT(rz_answer, &f2);
  struct rdzv_join_req one = {"x", "h1", 1, 1, 0, {2, 2, -1, -1, -1, -1}, NULL};
  ASSERT_EQ(rdzv_join(rv, "fresh", &one, &w1, msgbuf(&msg)), 0);
  one.node_id = "y";
  ASSERT_EQ(rdzv_join(rv, "fresh", &one, &w2, msgbuf(&msg)), 0);
  ASSERT(f1 == 1 && f2 == 1);
  ASSERT_EQ(rdzv_leave(rv, "fresh", "x", 0, NULL), 0);
  ASSERT_EQ(rdzv_kv_set(rv, "fresh", "k", "v", 1, &version), 0);
  ASSERT_EQ(rdzv_end(rv, "ended", 1, "again"), 0); /* no change: already shut */
  rdzv_gc(rv);                                     /* "ended" is forgotten */
  ASSERT(rdzv_find(rv, "ended") == NULL);
  struct mu_buf want = MU_BUF_INIT(MU_BUF_UNBOUNDED), got = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(rdzv_encode(rv, &want), 0);
  rdzv_set_change_hook(rv, NULL, NULL);
  rz_free(&loop, rv);
  /* the whole state before, then the changes in order: the same state, byte for byte */
  rv = rdzv_new(&loop, 0);
  ASSERT_EQ(rdzv_restore(rv, b.data, b.len), 0);
  ASSERT(rz_replay(rv, &log) >= 10);
  ASSERT_EQ(rdzv_encode(rv, &got), 0);
  ASSERT_EQ(got.len, want.len);
  ASSERT(memcmp(got.data, want.data, got.len) == 0);
  ASSERT(rdzv_find(rv, "ended") == NULL);
  struct rdzv_answer a;
  ASSERT_EQ(rdzv_heartbeat(rv, "job", "node-b", &a), RDZV_ENOT_MEMBER);
  ASSERT_EQ(rdzv_kv_get(rv, "job", "ctr", &a, 0, NULL), 0);
  ASSERT_EQ(a.value_len, 1);
  rz_free(&loop, rv);
  /* a change log is only read over the state it follows: without it, the first change to a
   * run it does not hold is refused; every truncation of a body is refused */
  rv = rdzv_new(&loop, 0);
  ASSERT_EQ(rz_replay(rv, &log), -1);
  rz_free(&loop, rv);
  uint32_t n0;
  memcpy(&n0, log.data, sizeof(n0));
  for (uint32_t n = 0; n < n0; n++) {
    rv = rdzv_new(&loop, 0);
    ASSERT_EQ(rdzv_restore(rv, b.data, b.len), 0);
    ASSERT_EQ(rdzv_apply_change(rv, log.data + 4, n), -1);
    rz_free(&loop, rv);
  }
  /* a flipped bit in every byte of every body, applied in order over the state: -1 or a
   * consistent state, never a crash or a leak (ASan) */
  rv = rdzv_new(&loop, 0);
  ASSERT_EQ(rdzv_restore(rv, b.data, b.len), 0);
  for (size_t off = 0; off < log.len;) {
    uint32_t n;
    memcpy(&n, log.data + off, sizeof(n));
    for (uint32_t i = 0; i < n; i++) {
      log.data[off + 4 + i] ^= 0x04;
      (void)rdzv_apply_change(rv, log.data + off + 4, n);
      log.data[off + 4 + i] ^= 0x04;
    }
    (void)rdzv_apply_change(rv, log.data + off + 4, n);
    off += 4 + n;
  }
  rz_free(&loop, rv);
  mu_buf_release(&b);
  mu_buf_release(&log);
  mu_buf_release(&msg);
  mu_buf_release(&want);
  mu_buf_release(&got);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* Every goodput change of a run (the restart budget and count, reports, the round history,
 * an unhealthy node, a member marked failed) replays to the same state, and survives a blob
 * round trip; a version 1 blob (before goodput) still restores. */
TEST(persist__rdzv_goodput_replays_and_roundtrips)
{
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct rdzv *rv = rdzv_new(&loop, 0);
  struct mu_buf log = MU_BUF_INIT(MU_BUF_UNBOUNDED), msg = MU_BUF_INIT(4096);
  rdzv_set_change_hook(rv, rz_collect, &log);
  int f[3] = {0, 0, 0};
  struct rdzv_wait w[3] = {RDZV_WAIT_INIT(rz_answer, &f[0]), RDZV_WAIT_INIT(rz_answer, &f[1]),
                           RDZV_WAIT_INIT(rz_answer, &f[2])};
  struct rdzv_join_req q = {"a", "h1", 2, 1, 0, {2, 2, -1, -1, -1, 3}, NULL};
  ASSERT_EQ(rdzv_join(rv, "gp", &q, &w[0], msgbuf(&msg)), 0);
  q.node_id = "b";
  ASSERT_EQ(rdzv_join(rv, "gp", &q, &w[1], msgbuf(&msg)), 0);
  ASSERT(f[0] == 1 && f[1] == 1);
  struct rdzv_report_answer a;
  ASSERT_EQ(rdzv_report(rv, "gp", "a", 1, RDZV_REPORT_STARTED, NULL, &a, msgbuf(&msg)), 0);
  ASSERT_EQ(rdzv_report(rv, "gp", "b", 1, RDZV_REPORT_STARTED, NULL, &a, msgbuf(&msg)), 0);
  ASSERT_EQ(rdzv_report(rv, "gp", "b", 1, RDZV_REPORT_PROGRESS, NULL, &a, msgbuf(&msg)), 0);
  ASSERT_EQ(rdzv_report(rv, "gp", "b", 1, RDZV_REPORT_HUNG, "hung: no progress for 4 s", &a,
                        msgbuf(&msg)),
            0);
  ASSERT_EQ(a.counted, 1);
  q.node_id = "x";
  ASSERT_EQ(rdzv_health(rv, "gp", &q, 0, "nvidia-smi: GPU 2 lost", 0, NULL, msgbuf(&msg)), 0);
  q.node_id = "b";
  w[1] = (struct rdzv_wait)RDZV_WAIT_INIT(rz_answer, &f[1]);
  ASSERT_EQ(rdzv_join(rv, "gp", &q, &w[1], msgbuf(&msg)), 0);
  rdzv_wait_cancel(&w[1]); /* b's re-join is withdrawn: round 2 has not closed */
  struct mu_buf want = MU_BUF_INIT(MU_BUF_UNBOUNDED), got = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(rdzv_encode(rv, &want), 0);
  struct mu_buf gp = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  rdzv_run_goodput_json(rdzv_find(rv, "gp"), &gp);
  rdzv_set_change_hook(rv, NULL, NULL);
  rz_free(&loop, rv);
  rv = rdzv_new(&loop, 0);
  ASSERT(rz_replay(rv, &log) >= 6);
  ASSERT_EQ(rdzv_encode(rv, &got), 0);
  ASSERT_EQ(got.len, want.len);
  ASSERT(memcmp(got.data, want.data, got.len) == 0);
  rz_free(&loop, rv);
  rv = rdzv_new(&loop, 0);
  ASSERT_EQ(rdzv_restore(rv, want.data, want.len), 0);
  struct mu_buf gp2 = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  rdzv_run_goodput_json(rdzv_find(rv, "gp"), &gp2);
  ASSERT_STR_EQ(mu_buf_str(&gp2), mu_buf_str(&gp));
  ASSERT(strstr(mu_buf_str(&gp2), "\"restart_count\":1,\"max_restarts\":3") != NULL);
  ASSERT(strstr(mu_buf_str(&gp2), "GPU 2 lost") != NULL);
  ASSERT(strstr(mu_buf_str(&gp2), "\"end\":\"hung\",\"counted\":true") != NULL);
  rz_free(&loop, rv);
  /* a version 1 blob: one run, no round, no KV, no goodput: restores, keeps no budget */
  static const unsigned char v1[] = {
      1,  0,  0, 0, 1,   0,   0, 0,             /* version 1, one run */
      2,  0,  0, 0, 'o', 'l',                   /* "ol" */
      1,  0,  0, 0, 1,   0,   0, 0, 0, 0, 0, 0, /* min 1, max 1, last call 0 */
      16, 39, 0, 0, 16,  39,  0, 0,             /* join timeout, lease 10000 */
      0,  0,  0, 0, 0,   0,   0, 0, 0, 0, 0, 0, /* open, reason "", joining */
      0,  0,  0, 0, 0,   0,   0, 0, 0, 0, 0, 0, /* round 0 with 0 members */
      0,  0,  0, 0, 0,   0,   0, 0, 0, 0, 0, 0, /* KV version 0, 0 keys */
  };
  rv = rdzv_new(&loop, 0);
  ASSERT_EQ(rdzv_restore(rv, v1, sizeof(v1)), 0);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(rv, "ol"), &info);
  ASSERT_EQ(info.max_restarts, -1);
  rz_free(&loop, rv);
  mu_buf_release(&gp);
  mu_buf_release(&gp2);
  mu_buf_release(&want);
  mu_buf_release(&got);
  mu_buf_release(&log);
  mu_buf_release(&msg);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(persist__rdzv_restore_rejects_damage)
{
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct mu_buf b = rz_state(&loop);
  /* every truncation, and a flipped bit in every byte: -1 or a consistent state, never a
   * crash or a leak (ASan) */
  for (size_t n = 0; n < b.len; n++) {
    struct rdzv *rv = rdzv_new(&loop, 0);
    ASSERT_EQ(rdzv_restore(rv, b.data, n), -1);
    rz_free(&loop, rv);
  }
  for (size_t i = 0; i < b.len; i++) {
    b.data[i] ^= 0x04;
    struct rdzv *rv = rdzv_new(&loop, 0);
    (void)rdzv_restore(rv, b.data, b.len);
    rz_free(&loop, rv);
    b.data[i] ^= 0x04;
  }
  mu_buf_release(&b);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* ---------------------------------------------------------------------------------------------
 * Snapshots in the background (the compactor thread writes them while the loop serves)
 */

/* How many "snap-*.snap" and "wal-*.log" files `dir` holds, and whether snap.tmp is there. */
static void count_files(const char *dir, int *snaps, int *wals)
{
  *snaps = *wals = 0;
  DIR *d = opendir(dir);
  ASSERT(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "snap-", 5) == 0)
      (*snaps)++;
    else if (strncmp(de->d_name, "wal-", 4) == 0)
      (*wals)++;
  }
  closedir(d);
}

/* Runs the loop until `dir` holds `snaps` snapshots and `wals` segments (10 s at most). */
static void run_until_files(struct world *w, const char *dir, int snaps, int wals)
{
  int s = -1, l = -1;
  for (int i = 0; i < 5000; i++) {
    uv_run(&w->loop, UV_RUN_NOWAIT);
    count_files(dir, &s, &l);
    if (s == snaps && l == wals)
      return;
    usleep(2000);
  }
  ASSERT_EQ(s, snaps);
  ASSERT_EQ(l, wals);
}

/* Closes `w` as a crash would (no final snapshot), opens `dir` again into it, and checks that
 * the whole state came back. */
static void crash_and_compare(struct world *w, const char *dir, enum persist_fsync mode,
                              uint64_t every)
{
  char *before = state_of(w->s);
  world_close(w, 0);
  ASSERT_EQ(world_open(w, dir, mode, every), 0);
  char *after = state_of(w->s);
  ASSERT_STR_EQ(after, before);
  mu_free(before);
  mu_free(after);
}

static void snapshot_in_background(enum persist_fsync mode)
{
  char *dir = tmpdir();
  struct world w;
  ASSERT_EQ(world_open(&w, dir, mode, 10), 0);
  char key[32];
  for (int i = 0; i < 10; i++) {
    snprintf(key, sizeof(key), "/k/%d", i);
    w_set(w.s, key, "before", 0);
  }
  /* the kick switches segments and starts the compactor; the writes made while it runs go to the
   * new segment, and the old one goes once the snapshot is durable */
  uv_run(&w.loop, UV_RUN_NOWAIT);
  for (int i = 0; i < 5; i++) {
    snprintf(key, sizeof(key), "/during/%d", i);
    w_set(w.s, key, "while the compactor writes", 0);
  }
  run_until_files(&w, dir, 1, 1);
  char *snap = mu_asprintf("%s/snap-%020d.snap", dir, 10);
  struct stat st;
  ASSERT_EQ(stat(snap, &st), 0);
  char *tmp = mu_asprintf("%s/snap.tmp", dir);
  ASSERT(stat(tmp, &st) != 0);
  crash_and_compare(&w, dir, mode, 10);
  ASSERT_EQ(w.rep.snapshot_index, 10);
  ASSERT_EQ(w.rep.records, 5);
  world_close(&w, 1);
  mu_free(snap);
  mu_free(tmp);
  rmdir_all(dir);
  mu_free(dir);
}

TEST(persist__snapshot_in_background_batch)
{
  snapshot_in_background(PERSIST_FSYNC_BATCH);
}

TEST(persist__snapshot_in_background_always)
{
  snapshot_in_background(PERSIST_FSYNC_ALWAYS);
}

/* A snapshot that cannot be written (snap.tmp is a dir here) is reported and tried again; the
 * log keeps every write meanwhile, across both segments. */
TEST(persist__snapshot_failure_retried)
{
  char *dir = tmpdir();
  char *tmp = mu_asprintf("%s/snap.tmp", dir);
  struct world w;
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_BATCH, 4), 0);
  ASSERT_EQ(mkdir(tmp, 0700), 0);
  char key[32];
  for (int i = 0; i < 4; i++) {
    snprintf(key, sizeof(key), "/a/%d", i);
    w_set(w.s, key, "1", 0);
  }
  run_until_files(&w, dir, 0, 2); /* failed: both segments stay */
  crash_and_compare(&w, dir, PERSIST_FSYNC_BATCH, 4);
  ASSERT_EQ(w.rep.segments, 2);
  /* retried once the dir is gone (the back-off starts again with the process) */
  ASSERT_EQ(rmdir(tmp), 0);
  for (int i = 0; i < 4; i++) {
    snprintf(key, sizeof(key), "/b/%d", i);
    w_set(w.s, key, "2", 0);
  }
  run_until_files(&w, dir, 1, 1);
  crash_and_compare(&w, dir, PERSIST_FSYNC_BATCH, 4);
  world_close(&w, 1);
  mu_free(tmp);
  rmdir_all(dir);
  mu_free(dir);
}

/* 1 when `path` exists. */
static int exists(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0;
}

/* Runs the loop until `path` exists (`want` 1) or is gone (0), 10 s at most. */
static void run_until_exists(struct world *w, const char *path, int want)
{
  for (int i = 0; i < 5000 && exists(path) != want; i++) {
    uv_run(&w->loop, UV_RUN_NOWAIT);
    usleep(2000);
  }
  ASSERT_EQ(exists(path), want);
}

/* Only rendezvous changes since the last snapshot (no store write: the index stands still): the
 * next snapshot is taken by the compactor too, at the same index, with a segment numbered after
 * the current one, and it holds those changes. */
TEST(persist__snapshot_of_rdzv_changes_only)
{
  char *dir = tmpdir();
  struct world w;
  ASSERT_EQ(world_open_with(&w, dir, PERSIST_FSYNC_BATCH, 4, 0, 1), 0);
  char key[32];
  for (int i = 0; i < 4; i++) {
    snprintf(key, sizeof(key), "/k/%d", i);
    w_set(w.s, key, "v", 0);
  }
  char *seg2 = seg_path(dir, 2, 5);
  char *seg3 = seg_path(dir, 3, 5);
  char *snap = mu_asprintf("%s/snap-%020d.snap", dir, 4);
  run_until_files(&w, dir, 1, 1);
  ASSERT(exists(seg2) && exists(snap));
  /* a run of one node (a join, a round closed), then KV writes: 4 records, all at index 4 */
  struct mu_buf msg = MU_BUF_INIT(4096);
  int joined = 0;
  struct rdzv_wait wj = RDZV_WAIT_INIT(rz_answer, &joined);
  struct rdzv_join_req one = {"solo", "h", 1, 1, 0, {1, 1, -1, -1, 60000, -1}, NULL};
  ASSERT_EQ(rdzv_join(w.rv, "job", &one, &wj, msgbuf(&msg)), 0);
  ASSERT_EQ(joined, 1);
  uint64_t version = 0;
  for (int i = 0; i < 3; i++) {
    snprintf(key, sizeof(key), "kv%d", i);
    ASSERT_EQ(rdzv_kv_set(w.rv, "job", key, "val", 3, &version), 0);
  }
  ASSERT_EQ(w.s->index, 4);
  /* the loop switched to segment 3 and went on; the compactor wrote the snapshot and dropped
   * segment 2 */
  run_until_exists(&w, seg2, 0);
  ASSERT(exists(seg3) && exists(snap));
  /* written while and after it ran: in segment 3 */
  ASSERT_EQ(rdzv_kv_set(w.rv, "job", "later", "x", 1, &version), 0);
  for (int i = 0; i < 20; i++)
    uv_run(&w.loop, UV_RUN_NOWAIT);
  char *before = state_of(w.s);
  struct mu_buf want = MU_BUF_INIT(MU_BUF_UNBOUNDED), got = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(rdzv_encode(w.rv, &want), 0);
  world_close(&w, 0); /* a crash: no final snapshot */
  ASSERT_EQ(world_open_with(&w, dir, PERSIST_FSYNC_BATCH, 4, 0, 1), 0);
  ASSERT_EQ(w.rep.snapshot_index, 4);
  ASSERT_EQ(w.rep.segments, 1);
  char *after = state_of(w.s);
  ASSERT_STR_EQ(after, before);
  ASSERT_EQ(rdzv_encode(w.rv, &got), 0);
  ASSERT_EQ(got.len, want.len); /* the runs, rounds and KV, each change once */
  struct rdzv_answer a;
  ASSERT_EQ(rdzv_kv_get(w.rv, "job", "kv2", &a, 0, NULL), 0);
  ASSERT_EQ(rdzv_kv_get(w.rv, "job", "later", &a, 0, NULL), 0);
  world_close(&w, 1);
  mu_buf_release(&want);
  mu_buf_release(&got);
  mu_buf_release(&msg);
  mu_free(before);
  mu_free(after);
  mu_free(seg2);
  mu_free(seg3);
  mu_free(snap);
  rmdir_all(dir);
  mu_free(dir);
}

/* The end of the records of log segment `path` (without the zeros written ahead of them). */
static size_t records_end(const char *path)
{
  size_t n = 0;
  struct wal_reader r;
  unsigned char *data = slurp_reader(path, &r, &n);
  const unsigned char *p;
  size_t len;
  while (wal_read(&r, &p, &len) == WAL_RECORD)
    ;
  mu_free(data);
  return r.off;
}

/* The bytes of the log records in the segments in `dir`. */
static long long wal_bytes(const char *dir)
{
  long long n = 0;
  DIR *d = opendir(dir);
  ASSERT(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "wal-", 4) != 0)
      continue;
    char *path = mu_asprintf("%s/%s", dir, de->d_name);
    n += (long long)records_end(path);
    mu_free(path);
  }
  closedir(d);
  return n;
}

/* The size of `path` (0 when missing). */
static long long file_bytes(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* Without a record count, large overwrites (here /v1 KV values, which no history keeps) trigger
 * snapshots by the log's size: past max(snapshot_bytes, 2 x the last snapshot), so the log
 * stays about that small. */
TEST(persist__snapshot_by_log_size)
{
  char *dir = tmpdir();
  struct world w;
  const long long limit = 64 << 10, vlen = 16 << 10;
  ASSERT_EQ(world_open_with(&w, dir, PERSIST_FSYNC_ALWAYS, 0, (uint64_t)limit, 1), 0);
  struct mu_buf msg = MU_BUF_INIT(4096);
  int joined = 0;
  struct rdzv_wait wj = RDZV_WAIT_INIT(rz_answer, &joined);
  struct rdzv_join_req one = {"solo", "h", 1, 1, 0, {1, 1, -1, -1, 60000, -1}, NULL};
  ASSERT_EQ(rdzv_join(w.rv, "job", &one, &wj, msgbuf(&msg)), 0);
  char *value = mu_malloc((size_t)vlen);
  char *snap = mu_asprintf("%s/snap-%020d.snap", dir, 0); /* the v2 index stays 0 */
  uint64_t version = 0;
  for (int i = 0; i < 40; i++) { /* 640 KiB of log without compaction */
    memset(value, 'a' + i % 26, (size_t)vlen);
    ASSERT_EQ(rdzv_kv_set(w.rv, "job", i % 2 ? "odd" : "even", value, (size_t)vlen, &version), 0);
    /* written at once (fsync always); a snapshot due starts in the loop's next iteration, and
     * the compactor only ever starts from the loop, so between two runs of it the files stand
     * still */
    int settled = 0;
    for (int t = 0; t < 2500 && !settled; t++) {
      uv_run(&w.loop, UV_RUN_NOWAIT);
      long long bound = file_bytes(snap) * 2 > limit ? file_bytes(snap) * 2 : limit;
      settled = !persist_snapshot_running(w.p) && wal_bytes(dir) <= bound + vlen + 1024;
      if (!settled)
        usleep(2000);
    }
    ASSERT(settled);
  }
  ASSERT(exists(snap)); /* replaced by each snapshot (all at index 0) */
  struct mu_buf want = MU_BUF_INIT(MU_BUF_UNBOUNDED), got = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(rdzv_encode(w.rv, &want), 0);
  world_close(&w, 0);
  ASSERT_EQ(world_open_with(&w, dir, PERSIST_FSYNC_ALWAYS, 0, (uint64_t)limit, 1), 0);
  ASSERT(w.rep.segments >= 1);
  ASSERT_EQ(rdzv_encode(w.rv, &got), 0);
  ASSERT_EQ(got.len, want.len);
  ASSERT(memcmp(got.data, want.data, got.len) == 0);
  world_close(&w, 1);
  mu_buf_release(&want);
  mu_buf_release(&got);
  mu_buf_release(&msg);
  mu_free(value);
  mu_free(snap);
  rmdir_all(dir);
  mu_free(dir);
}

/* Rewrites snapshot `path` as musterd wrote it before segments were numbered (no segment number
 * in its header). */
static void snap_unnumber(const char *path)
{
  size_t n = 0;
  struct wal_reader rd;
  unsigned char *data = slurp_reader(path, &rd, &n);
  const unsigned char *pl;
  size_t len;
  struct wal_rec r;
  ASSERT_EQ(wal_read(&rd, &pl, &len), WAL_RECORD);
  ASSERT_EQ(wal_rec_decode(pl, len, &r), 0);
  ASSERT_EQ(r.type, WAL_REC_SNAP_HEAD);
  ASSERT(r.expire_ns > 0);
  r.expire_ns = 0;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(wal_rec_put(&b, &r), 0);
  ASSERT_EQ(mu_buf_append(&b, data + rd.off, n - rd.off), 0);
  spit(path, (const unsigned char *)b.data, b.len);
  mu_buf_release(&b);
  mu_free(data);
}

/* A crash between a snapshot (at 5) and the deletion of the segment it covers, which is damaged
 * too: it is not needed, so it is not read. With `older`, the dir is as an older musterd left it
 * (segments named by their first index, a snapshot that does not name the segment after it).
 * Returns: the dir, open in `w` (caller frees). */
static char *interrupted_compaction(struct world *w, int older)
{
  char *dir = dir_with_writes(w, 5);
  char *seg1 = seg_path(dir, 1, 1), *old = older ? seg_path(dir, 0, 1) : seg_path(dir, 1, 1);
  size_t n = 0;
  unsigned char *copy = slurp(seg1, &n);
  ASSERT_EQ(persist_snapshot(w->p), 0);
  ASSERT(!exists(seg1)); /* compacted away */
  w_set(w->s, "/k", "after", 0);
  w_set(w->s, "/k2", "after", 0);
  char *before = state_of(w->s);
  world_close(w, 0);
  copy[n / 2] ^= 0x55;
  spit(old, copy, n);
  if (older) { /* the records after the snapshot in wal-6 */
    char *snap = mu_asprintf("%s/snap-%020d.snap", dir, 5);
    char *seg2 = seg_path(dir, 2, 6), *old6 = seg_path(dir, 0, 6);
    snap_unnumber(snap);
    ASSERT_EQ(rename(seg2, old6), 0);
    mu_free(snap);
    mu_free(seg2);
    mu_free(old6);
  }
  ASSERT_EQ(world_open(w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  char *after = state_of(w->s);
  ASSERT_STR_EQ(after, before);
  ASSERT_EQ(w->rep.snapshot_index, 5);
  ASSERT_EQ(w->rep.segments, 1);
  ASSERT_EQ(w->rep.records, 2);
  mu_free(before);
  mu_free(after);
  mu_free(copy);
  mu_free(old);
  mu_free(seg1);
  return dir;
}

TEST(persist__interrupted_compaction)
{
  struct world w;
  char *dir = interrupted_compaction(&w, 0);
  world_close(&w, 0);
  rmdir_all(dir);
  mu_free(dir);
}

/* A data dir written by an older musterd loads, and the next snapshot moves it to numbered
 * segments; one without a snapshot too. */
TEST(persist__old_named_dir_loads)
{
  struct world w;
  char *dir = interrupted_compaction(&w, 1);
  char *old1 = seg_path(dir, 0, 1), *old6 = seg_path(dir, 0, 6), *new1 = seg_path(dir, 1, 9);
  char *snap = mu_asprintf("%s/snap-%020d.snap", dir, 5);
  /* it appends to wal-6; the next snapshot starts segment 1 and drops the old names */
  w_set(w.s, "/k", "eight", 0);
  crash_and_compare(&w, dir, PERSIST_FSYNC_ALWAYS, 0);
  ASSERT_EQ(w.rep.records, 3);
  ASSERT_EQ(persist_snapshot(w.p), 0);
  ASSERT(!exists(old1) && !exists(old6) && !exists(snap) && exists(new1));
  w_set(w.s, "/k", "nine", 0);
  crash_and_compare(&w, dir, PERSIST_FSYNC_ALWAYS, 0);
  ASSERT_EQ(w.rep.snapshot_index, 8);
  ASSERT_EQ(w.rep.records, 1);
  world_close(&w, 0);
  /* an older musterd's dir without a snapshot: its segments, then numbered ones from 1 */
  rmdir_all(dir);
  mu_free(dir);
  dir = dir_with_writes(&w, 5);
  world_close(&w, 0);
  char *seg1 = seg_path(dir, 1, 1);
  mu_free(old1);
  old1 = seg_path(dir, 0, 1);
  ASSERT_EQ(rename(seg1, old1), 0);
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT_EQ(w.s->index, 5);
  w_set(w.s, "/k", "six", 0);
  world_close(&w, 1); /* the final snapshot, at 6: segment 1 after it */
  ASSERT(!exists(old1));
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT_EQ(w.s->index, 6);
  ASSERT_EQ(w.rep.snapshot_index, 6);
  world_close(&w, 0);
  mu_free(seg1);
  mu_free(snap);
  mu_free(old1);
  mu_free(old6);
  mu_free(new1);
  rmdir_all(dir);
  mu_free(dir);
}

/* The numbered segments after the snapshot follow each other: a missing one refuses to start,
 * even where the index would not show it (a segment of rendezvous changes only). */
/* A kill -9 right after a snapshot started: the loop had made the next segment, named after the
 * index then, and the last batch before it never became durable. The empty segment is replaced
 * by one named after the index the log reached, and the log goes on (those writes were never
 * acknowledged). */
TEST(persist__empty_segment_ahead_of_the_log)
{
  char *dir = tmpdir();
  struct world w;
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  for (int i = 0; i < 3; i++)
    w_set(w.s, "/k", "v", 0);
  world_close(&w, 0);
  char *ahead = seg_path(dir, 2, 6); /* records 4 and 5 were in the lost batch */
  spit(ahead, (const unsigned char *)"", 0);
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT(strstr(mu_buf_str(&w.rep.warning), "replaced by a segment that starts at index 4") !=
         NULL);
  ASSERT_EQ(w.s->index, 3);
  ASSERT(!exists(ahead));
  w_set(w.s, "/after", "z", 0);
  world_close(&w, 0);
  char *next = seg_path(dir, 2, 4);
  ASSERT(exists(next));
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT_EQ(w.rep.warning.len, 0);
  ASSERT_EQ(w.s->index, 4);
  ASSERT(v2_store_lookup(w.s, "/after") != NULL);
  world_close(&w, 0);
  mu_free(next);
  mu_free(ahead);
  rmdir_all(dir);
  mu_free(dir);
}

TEST(persist__missing_segment_refuses)
{
  struct world w;
  char *dir = dir_with_writes(&w, 3);
  ASSERT_EQ(persist_snapshot(w.p), 0);
  w_set(w.s, "/k", "four", 0);
  world_close(&w, 0);
  char *seg2 = seg_path(dir, 2, 4);
  char *seg3 = seg_path(dir, 3, 4);
  ASSERT_EQ(rename(seg2, seg3), 0);
  ASSERT(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0) != 0);
  ASSERT(strstr(w.err, seg3) != NULL);
  ASSERT(strstr(w.err, "a log segment is missing") != NULL);
  world_close(&w, 0);
  ASSERT_EQ(rename(seg3, seg2), 0);
  ASSERT_EQ(world_open(&w, dir, PERSIST_FSYNC_ALWAYS, 0), 0);
  ASSERT_EQ(w.s->index, 4);
  world_close(&w, 0);
  mu_free(seg2);
  mu_free(seg3);
  rmdir_all(dir);
  mu_free(dir);
}

/* ---------------------------------------------------------------------------------------------
 * A reply leaves only after a sync that covers its record (the durability barrier), per mode
 */

/* fdatasync() of this binary, interposed (the persist layer is linked in statically, so its
 * calls come here): the real call, and while `watching`, a count of the syncs and of those
 * whose file held the watched value before the sync began (so the sync made it durable). */
static atomic_int watching, syncs_seen, syncs_covering;
#define WATCHED "durable-7f3a9c"

/* Returns: 1 when the file fd holds `needle` (read with pread: its offset is untouched). */
static int fd_holds(int fd, const char *needle)
{
  struct stat st;
  size_t nl = strlen(needle), n;
  if (fstat(fd, &st) != 0 || st.st_size <= 0)
    return 0;
  char *b = mu_malloc((size_t)st.st_size);
  ssize_t got = pread(fd, b, (size_t)st.st_size, 0);
  int found = 0;
  for (n = 0; got > 0 && n + nl <= (size_t)got && !found; n++)
    found = memcmp(b + n, needle, nl) == 0;
  mu_free(b);
  return found;
}

/* Returns: 1 when the file open as fd (perhaps write-only) holds `needle`. */
static int file_of_fd_holds(int fd, const char *needle)
{
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  int rd = open(path, O_RDONLY | O_CLOEXEC);
  int found = rd >= 0 && fd_holds(rd, needle);
  if (rd >= 0)
    close(rd);
  return found;
}

int fdatasync(int fd)
{
  int had = atomic_load(&watching) && file_of_fd_holds(fd, WATCHED);
  int rc = (int)syscall(SYS_fdatasync, fd);
  if (rc == 0 && atomic_load(&watching)) {
    atomic_fetch_add(&syncs_seen, 1);
    if (had)
      atomic_fetch_add(&syncs_covering, 1);
  }
  return rc;
}

/* Returns: 1 when a wal-* file of dir holds `needle`. */
static int wal_holds(const char *dir, const char *needle)
{
  DIR *d = opendir(dir);
  struct dirent *e;
  int found = 0;
  while (d != NULL && !found && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "wal-", 4) != 0)
      continue;
    char *path = mu_asprintf("%s/%s", dir, e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    found = fd >= 0 && fd_holds(fd, needle);
    if (fd >= 0)
      close(fd);
    mu_free(path);
  }
  if (d != NULL)
    closedir(d);
  return found;
}

/* A musterd on 127.0.0.1 with a data dir in `mode` (the server, the store it logs, and the
 * barrier, as main.c puts them together) answers one PUT from a real socket (a fake connection
 * bypasses the barrier). The loop runs a step at a time; the first step after which the client
 * can read a byte of the reply checks what had been synced by then. */
static void reply_after_sync(enum persist_fsync mode)
{
  char *dir = tmpdir();
  uv_loop_t loop;
  struct rv_server_config cfg;
  struct persist_report rep;
  struct mu_buf err = MU_BUF_INIT(4096);
  uv_loop_init(&loop);
  rv_server_config_init(&cfg);
  cfg.listen_host = "127.0.0.1";
  cfg.listen_port = 0;
  struct rv_server *srv = rv_server_new(&loop, &cfg);
  struct persist *p =
      persist_open(dir, mode, 0, 0, v2_store_of(srv), v1_rdzv(srv), &loop, &rep, &err);
  ASSERT_NOT_NULL(p);
  persist_attach(p, srv);
  ASSERT_EQ(rv_server_listen(srv), 0);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)rv_server_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0); /* the kernel's backlog takes it */
  static const char req[] = "PUT /v2/keys/dur HTTP/1.1\r\nHost: x\r\nContent-Type: "
                            "application/x-www-form-urlencoded\r\nContent-Length: 20\r\n\r\n"
                            "value=" WATCHED;
  atomic_store(&watching, 1);
  ASSERT_EQ(send(fd, req, sizeof(req) - 1, 0), (ssize_t)(sizeof(req) - 1));
  char b[4096];
  ssize_t got = -1;
  for (int i = 0; i < 10000 && got <= 0; i++) { /* 10 s at most */
    uv_run(&loop, UV_RUN_NOWAIT);
    got = recv(fd, b, sizeof(b) - 1, MSG_DONTWAIT | MSG_PEEK);
    if (got <= 0)
      usleep(1000);
  }
  ASSERT(got > 0);
  /* The reply is out: its record must be durable by now. */
  if (mode == PERSIST_FSYNC_OFF) {
    ASSERT_EQ(atomic_load(&syncs_seen), 0); /* off: write() only, never a sync */
    ASSERT(wal_holds(dir, WATCHED));        /* ... but written before the reply */
  } else {
    ASSERT(atomic_load(&syncs_covering) > 0);
  }
  atomic_store(&watching, 0);
  got = recv(fd, b, sizeof(b) - 1, 0);
  ASSERT(got > 0);
  b[got] = '\0';
  ASSERT_NOT_NULL(strstr(b, "201 Created"));
  close(fd);
  rv_server_close(srv, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  persist_free(p);
  persist_report_release(&rep);
  mu_buf_release(&err);
  ASSERT_EQ(uv_loop_close(&loop), 0);
  rmdir_all(dir);
  mu_free(dir);
}

TEST(persist__reply_after_its_sync_batch)
{
  reply_after_sync(PERSIST_FSYNC_BATCH);
}

TEST(persist__reply_after_its_sync_always)
{
  reply_after_sync(PERSIST_FSYNC_ALWAYS);
}

TEST(persist__reply_after_its_write_off)
{
  reply_after_sync(PERSIST_FSYNC_OFF);
}
