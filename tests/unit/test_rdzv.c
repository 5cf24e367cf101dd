/* Tests for rendezvous/rdzv/ (rdzv.h): the native rendezvous state machine, on a real uv loop. */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "muster/errno.h"

#include "alloc.h"
#include "rdzv.h"
#include "task.h"

/* A recorded answer. */
struct rec {
  struct rdzv_wait w;
  int fired;
  int err;
  char message[512];
  char event[16];
  uint64_t round;
  uint32_t rank, nnodes, waiting;
  uint64_t offset, world, generation, version;
  char master[64];
  uint32_t master_port;
  char value[64];
  char members[4096];
  char session[RDZV_SESSION_HEX + 1];
};

/* The error text of the next call: the buffer emptied first. */
static struct mu_buf *msgbuf(struct mu_buf *b)
{
  mu_buf_clear(b);
  return b;
}
static void on_answer(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct rec *r = w->data;
  r->fired++;
  r->err = a->err;
  snprintf(r->message, sizeof(r->message), "%s", a->message ? a->message : "");
  snprintf(r->event, sizeof(r->event), "%s", a->event ? a->event : "");
  r->round = a->round ? a->round->number : a->round_number;
  r->waiting = a->waiting;
  r->generation = a->generation;
  r->version = a->version;
  if (a->value)
    snprintf(r->value, sizeof(r->value), "%.*s", (int)a->value_len, a->value);
  if (a->round) {
    r->rank = a->self.node_rank;
    r->nnodes = a->round->nnodes;
    r->offset = a->self.rank_offset;
    r->world = a->round->world_size;
    snprintf(r->master, sizeof(r->master), "%s", a->master.addr);
    r->master_port = a->master.master_port;
    snprintf(r->session, sizeof(r->session), "%s", a->session ? a->session : "");
    if (a->with_members) {
      size_t len = 0;
      const char *j = rdzv_round_members_json(a->round, &len);
      snprintf(r->members, sizeof(r->members), "%.*s", (int)len, j);
    }
  }
}

static void rec_init(struct rec *r)
{
  memset(r, 0, sizeof(*r));
  r->w.cb = on_answer;
  r->w.data = r;
}

/* Runs the loop for `ms` milliseconds. */
static void on_spin(uv_timer_t *t)
{
  uv_stop(t->loop);
}

static void spin(uv_loop_t *loop, uint64_t ms)
{
  uv_timer_t t;
  uv_timer_init(loop, &t);
  uv_timer_start(&t, on_spin, ms, 0);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
}

/* Milliseconds of loop time since t0 (a uv_now() taken when a deadline was set: the base the
 * deadline counts from). A check that something has NOT happened yet before its deadline only
 * applies while this is below the deadline: a loaded machine can stall the test past it, and
 * then the event has rightly happened. */
static uint64_t since(uv_loop_t *loop, uint64_t t0)
{
  uv_update_time(loop);
  return uv_now(loop) - t0;
}

struct env {
  uv_loop_t loop;
  struct rdzv *rv;
};

static void env_init(struct env *e, uint64_t gc_ms)
{
  ASSERT_EQ(uv_loop_init(&e->loop), 0);
  e->rv = rdzv_new(&e->loop, gc_ms);
}

static void env_done(struct env *e)
{
  rdzv_free(e->rv, NULL, NULL);
  uv_run(&e->loop, UV_RUN_DEFAULT);
  ASSERT_EQ(uv_loop_close(&e->loop), 0);
}

static void cfg(struct rdzv_join_req *q, uint32_t min, uint32_t max, int64_t last_call)
{
  memset(q, 0, sizeof(*q));
  q->addr = "127.0.0.1";
  q->local_world_size = 2;
  q->master_port = 29400;
  q->with_members = 1;
  q->config.min_nodes = min;
  q->config.max_nodes = max;
  q->config.last_call_ms = last_call;
  q->config.join_timeout_ms = -1;
  q->config.lease_ttl_ms = -1;
}

static int join(struct env *e, const char *run, struct rdzv_join_req *q, const char *node,
                struct rec *r)
{
  struct mu_buf msg = MU_BUF_INIT(4096);
  rec_init(r);
  q->node_id = node;
  int rc = rdzv_join(e->rv, run, q, &r->w, &msg);
  mu_buf_release(&msg);
  return rc;
}

TEST(rdzv__round_closes_at_max)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3];
  cfg(&q, 2, 3, 60000);
  ASSERT_EQ(join(&e, "job", &q, "a", &r[0]), 0);
  q.addr = "10.0.0.2";
  q.local_world_size = 3;
  ASSERT_EQ(join(&e, "job", &q, "b", &r[1]), 0);
  ASSERT_EQ(r[0].fired + r[1].fired, 0);
  q.addr = "10.0.0.3";
  q.local_world_size = 1;
  ASSERT_EQ(join(&e, "job", &q, "c", &r[2]), 0);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(r[i].fired, 1);
    ASSERT_EQ(r[i].err, 0);
    ASSERT_EQ(r[i].rank, i);
    ASSERT_EQ(r[i].nnodes, 3);
    ASSERT_EQ(r[i].world, 6);
    ASSERT_EQ(r[i].round, 1);
    ASSERT_STR_EQ(r[i].master, "127.0.0.1");
    ASSERT_EQ(r[i].master_port, 29400);
  }
  ASSERT_EQ(r[0].offset, 0);
  ASSERT_EQ(r[1].offset, 2);
  ASSERT_EQ(r[2].offset, 5);
  ASSERT(strstr(r[2].members, "\"node_id\":\"b\",\"addr\":\"10.0.0.2\",\"local_world_size\":3,"
                              "\"node_rank\":1,\"rank_offset\":2") != NULL);
  env_done(&e);
}

TEST(rdzv__round_closes_at_min_after_last_call)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[2];
  cfg(&q, 2, 4, 80);
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  uint64_t t0 = uv_now(&e.loop);
  spin(&e.loop, 30);
  if (since(&e.loop, t0) < 80)
    ASSERT_EQ(r[0].fired, 0);
  spin(&e.loop, 100);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[1].fired, 1);
  ASSERT_EQ(r[1].nnodes, 2);
  ASSERT_EQ(r[1].rank, 1);
  env_done(&e);
}

TEST(rdzv__below_min_never_closes_and_join_times_out)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r;
  cfg(&q, 2, 2, -1);
  q.config.join_timeout_ms = 50;
  join(&e, "job", &q, "a", &r);
  uint64_t t0 = uv_now(&e.loop);
  spin(&e.loop, 20);
  if (since(&e.loop, t0) < 50)
    ASSERT_EQ(r.fired, 0);
  spin(&e.loop, 60);
  ASSERT_EQ(r.fired, 1);
  ASSERT_EQ(r.err, RDZV_EJOIN_TIMEOUT);
  ASSERT(strstr(r.message, "min_nodes (2)") != NULL);
  ASSERT_STR_EQ(rdzv_err_code(r.err), "join_timeout");
  env_done(&e);
}

TEST(rdzv__ranks_stable_across_rounds)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[4], w;
  cfg(&q, 2, 4, 30);
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  join(&e, "job", &q, "c", &r[2]);
  spin(&e.loop, 60);
  ASSERT_EQ(r[2].fired, 1);
  ASSERT_EQ(r[2].rank, 2);
  /* a watches; a newcomer d arrives: a learns of it (room: 3 < 4). */
  rec_init(&w);
  ASSERT_EQ(rdzv_watch(e.rv, "job", "a", 1, 10000, &w.w), 0);
  ASSERT_EQ(w.fired, 0);
  join(&e, "job", &q, "d", &r[3]);
  ASSERT_EQ(w.fired, 1);
  ASSERT_STR_EQ(w.event, "waiting");
  ASSERT_EQ(w.waiting, 1);
  /* Members re-join in reverse order; the round closes once all three are back. */
  join(&e, "job", &q, "c", &r[2]);
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].fired, 0);
  join(&e, "job", &q, "a", &r[0]);
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(r[i].fired, 1);
    ASSERT_EQ(r[i].round, 2);
    ASSERT_EQ(r[i].rank, i);
    ASSERT_EQ(r[i].nnodes, 4);
  }
  /* b leaves with failure; the rest re-join at once, keeping their relative order. */
  rec_init(&w);
  ASSERT_EQ(rdzv_watch(e.rv, "job", "d", 2, 10000, &w.w), 0);
  ASSERT_EQ(rdzv_leave(e.rv, "job", "b", 1, "worker failed"), 0);
  ASSERT_EQ(w.fired, 1);
  ASSERT_STR_EQ(w.event, "broken");
  join(&e, "job", &q, "d", &r[3]);
  join(&e, "job", &q, "a", &r[0]);
  ASSERT_EQ(r[0].fired, 0);
  join(&e, "job", &q, "c", &r[2]);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[0].round, 3);
  ASSERT_EQ(r[0].rank, 0);
  ASSERT_EQ(r[2].rank, 1);
  ASSERT_EQ(r[3].rank, 2);
  ASSERT_EQ(r[3].nnodes, 3);
  ASSERT_EQ(r[3].offset, 4);
  env_done(&e);
}

TEST(rdzv__lease_expiry_breaks_round)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[2], w, w2;
  struct rdzv_answer hb;
  cfg(&q, 1, 2, 0);
  q.config.max_nodes = 2;
  q.config.min_nodes = 2;
  /* a heart-beats every 100 ms, b never: b's lease runs out after 1 s. The lease is long
   * next to the step so that a loaded machine, which may stall this process for a few hundred
   * ms, does not let a's lease run out too (it did with 80 ms and 30 ms steps). */
  q.config.lease_ttl_ms = 1000;
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].fired, 1);
  rec_init(&w);
  ASSERT_EQ(rdzv_watch(e.rv, "job", "a", 1, 10000, &w.w), 0);
  for (int i = 0; i < 40; i++) {
    spin(&e.loop, 100);
    ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "a", &hb), 0);
    if (w.fired)
      break;
  }
  ASSERT_EQ(w.fired, 1);
  ASSERT_STR_EQ(w.event, "broken");
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "b", &hb), RDZV_ENOT_MEMBER);
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "a", &hb), 0);
  ASSERT_STR_EQ(hb.state, "broken");
  ASSERT_EQ(hb.round_number, 1);
  /* A watch on the broken round answers at once. */
  rec_init(&w2);
  ASSERT_EQ(rdzv_watch(e.rv, "job", "a", 1, 10000, &w2.w), 0);
  ASSERT_EQ(w2.fired, 1);
  ASSERT_STR_EQ(w2.event, "broken");
  struct rdzv_stats st;
  rdzv_stats(e.rv, &st);
  ASSERT_EQ(st.leases_expired, 1);
  env_done(&e);
}

TEST(rdzv__waiting_signalled_only_with_room)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3], w;
  struct rdzv_answer hb;
  cfg(&q, 2, 2, -1);
  join(&e, "full", &q, "a", &r[0]);
  join(&e, "full", &q, "b", &r[1]);
  ASSERT_EQ(r[0].fired, 1);
  rec_init(&w);
  ASSERT_EQ(rdzv_watch(e.rv, "full", "a", 1, 60, &w.w), 0);
  uint64_t t0 = uv_now(&e.loop);
  join(&e, "full", &q, "c", &r[2]);
  spin(&e.loop, 20);
  if (since(&e.loop, t0) < 60)
    ASSERT_EQ(w.fired, 0);
  ASSERT_EQ(rdzv_heartbeat(e.rv, "full", "a", &hb), 0);
  ASSERT_EQ(hb.waiting, 1);
  ASSERT_STR_EQ(hb.state, "active");
  spin(&e.loop, 80);
  ASSERT_EQ(w.fired, 1);
  ASSERT_STR_EQ(w.event, "none");
  ASSERT_EQ(w.waiting, 1);
  ASSERT_EQ(r[2].fired, 0);
  /* When the round breaks, the survivor and the waiting node form the next round. */
  ASSERT_EQ(rdzv_leave(e.rv, "full", "b", 1, "lost"), 0);
  join(&e, "full", &q, "a", &r[0]);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[2].fired, 1);
  ASSERT_EQ(r[0].rank, 0);
  ASSERT_EQ(r[2].rank, 1);
  ASSERT_EQ(r[2].round, 2);
  env_done(&e);
}

TEST(rdzv__more_joins_than_max_wait_for_room)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3];
  cfg(&q, 1, 2, 1000);
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  join(&e, "job", &q, "c", &r[2]);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[1].fired, 1);
  ASSERT_EQ(r[2].fired, 0);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.waiting, 1);
  ASSERT_EQ(info.nnodes, 2);
  ASSERT_EQ(info.round_state, RDZV_ROUND_ACTIVE);
  env_done(&e);
}

TEST(rdzv__config_mismatch_and_bad_request)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[2];
  struct mu_buf msg = MU_BUF_INIT(4096);
  cfg(&q, 2, 4, -1);
  join(&e, "job", &q, "a", &r[0]);
  cfg(&q, 3, 4, -1);
  ASSERT_EQ(join(&e, "job", &q, "b", &r[1]), 0);
  ASSERT_EQ(r[1].fired, 1);
  ASSERT_EQ(r[1].err, RDZV_ECONFIG_MISMATCH);
  ASSERT(strstr(r[1].message, "2:4") != NULL);
  cfg(&q, 3, 2, -1);
  rec_init(&r[1]);
  q.node_id = "b";
  ASSERT_EQ(rdzv_join(e.rv, "job2", &q, &r[1].w, msgbuf(&msg)), RDZV_EBAD_REQUEST);
  ASSERT(strstr(mu_buf_str(&msg), "max_nodes") != NULL);
  cfg(&q, 1, 1, -1);
  q.node_id = "b\"";
  ASSERT_EQ(rdzv_join(e.rv, "job2", &q, &r[1].w, msgbuf(&msg)), RDZV_EBAD_REQUEST);
  q.node_id = "b";
  ASSERT_EQ(rdzv_join(e.rv, "bad/id", &q, &r[1].w, msgbuf(&msg)), RDZV_EBAD_REQUEST);
  ASSERT(strstr(mu_buf_str(&msg), "run_id") != NULL);
  ASSERT_EQ(r[1].fired, 0);
  env_done(&e);
  mu_buf_release(&msg);
}

TEST(rdzv__cancelled_join_is_withdrawn)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3];
  cfg(&q, 2, 2, -1);
  join(&e, "job", &q, "a", &r[0]);
  rdzv_wait_cancel(&r[0].w);
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].fired, 0);
  join(&e, "job", &q, "c", &r[2]);
  ASSERT_EQ(r[0].fired, 0);
  ASSERT_EQ(r[1].fired, 1);
  ASSERT_EQ(r[2].rank, 1);
  /* A second join from the same node replaces the first. */
  struct rec x, y;
  cfg(&q, 3, 3, -1);
  join(&e, "job3", &q, "n", &x);
  join(&e, "job3", &q, "n", &y);
  ASSERT_EQ(x.fired, 1);
  ASSERT_EQ(x.err, RDZV_EREPLACED);
  ASSERT_EQ(y.fired, 0);
  env_done(&e);
}

TEST(rdzv__barrier_timeout_and_reuse)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r, b[3];
  struct mu_buf msg = MU_BUF_INIT(4096);
  cfg(&q, 1, 1, -1);
  join(&e, "job", &q, "a", &r);
  ASSERT_EQ(rdzv_barrier(e.rv, "nope", "x", 1, 100, "0", &b[0].w, msgbuf(&msg)), RDZV_ENO_SUCH_RUN);
  for (int gen = 1; gen <= 2; gen++) {
    const char *ids[3] = {"r0", "r1", "r2"};
    for (int i = 0; i < 3; i++) {
      rec_init(&b[i]);
      ASSERT_EQ(rdzv_barrier(e.rv, "job", "start", 3, 10000, ids[i], &b[i].w, msgbuf(&msg)), 0);
      if (i < 2)
        ASSERT_EQ(b[0].fired, 0);
    }
    for (int i = 0; i < 3; i++) {
      ASSERT_EQ(b[i].fired, 1);
      ASSERT_EQ(b[i].err, 0);
      ASSERT_EQ(b[i].generation, gen);
    }
  }
  /* The same id twice counts once (the first arrival is replaced). */
  rec_init(&b[0]);
  rec_init(&b[1]);
  rdzv_barrier(e.rv, "job", "dup", 2, 10000, "r0", &b[0].w, msgbuf(&msg));
  rdzv_barrier(e.rv, "job", "dup", 2, 10000, "r0", &b[1].w, msgbuf(&msg));
  ASSERT_EQ(b[0].err, RDZV_EREPLACED);
  ASSERT_EQ(b[1].fired, 0);
  /* A different count is refused; a timeout withdraws the arrival. */
  rec_init(&b[2]);
  ASSERT_EQ(rdzv_barrier(e.rv, "job", "dup", 3, 10000, "r1", &b[2].w, msgbuf(&msg)),
            RDZV_ECOUNT_MISMATCH);
  ASSERT(strstr(mu_buf_str(&msg), "waiting for 2") != NULL);
  rdzv_wait_cancel(&b[1].w);
  rec_init(&b[0]);
  rdzv_barrier(e.rv, "job", "slow", 2, 40, "r0", &b[0].w, msgbuf(&msg));
  spin(&e.loop, 80);
  ASSERT_EQ(b[0].fired, 1);
  ASSERT_EQ(b[0].err, RDZV_EBARRIER_TIMEOUT);
  ASSERT(strstr(b[0].message, "1 of 2") != NULL);
  /* After the timeout the barrier starts empty again. */
  rec_init(&b[0]);
  rec_init(&b[1]);
  rdzv_barrier(e.rv, "job", "slow", 2, 1000, "r0", &b[0].w, msgbuf(&msg));
  rdzv_barrier(e.rv, "job", "slow", 2, 1000, "r1", &b[1].w, msgbuf(&msg));
  ASSERT_EQ(b[0].generation, 1);
  env_done(&e);
  mu_buf_release(&msg);
}

TEST(rdzv__kv_set_get_wait_add)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r, w, w2;
  struct rdzv_answer a;
  uint64_t ver = 0;
  int64_t n = 0;
  cfg(&q, 1, 1, -1);
  join(&e, "job", &q, "a", &r);
  ASSERT_EQ(rdzv_kv_get(e.rv, "job", "k", &a, 0, NULL), RDZV_ENO_SUCH_KEY);
  ASSERT_EQ(rdzv_kv_set(e.rv, "job", "k", "hello", 5, &ver), 0);
  ASSERT_EQ(ver, 1);
  ASSERT_EQ(rdzv_kv_get(e.rv, "job", "k", &a, 0, NULL), 0);
  ASSERT_EQ(a.value_len, 5);
  ASSERT_EQ(memcmp(a.value, "hello", 5), 0);
  /* A wait on an absent key answers when it is set. */
  rec_init(&w);
  ASSERT_EQ(rdzv_kv_get(e.rv, "job", "addr0", &a, 5000, &w.w), 1);
  ASSERT_EQ(w.fired, 0);
  ASSERT_EQ(rdzv_kv_set(e.rv, "job", "addr0", "10.0.0.1:5000", 13, &ver), 0);
  ASSERT_EQ(w.fired, 1);
  ASSERT_STR_EQ(w.value, "10.0.0.1:5000");
  ASSERT_EQ(w.version, 2);
  /* ... or times out. */
  rec_init(&w2);
  ASSERT_EQ(rdzv_kv_get(e.rv, "job", "never", &a, 30, &w2.w), 1);
  spin(&e.loop, 60);
  ASSERT_EQ(w2.fired, 1);
  ASSERT_EQ(w2.err, RDZV_EKV_TIMEOUT);
  /* Counters. */
  ASSERT_EQ(rdzv_kv_add(e.rv, "job", "cnt", 5, &n), 0);
  ASSERT_EQ(n, 5);
  ASSERT_EQ(rdzv_kv_add(e.rv, "job", "cnt", -2, &n), 0);
  ASSERT_EQ(n, 3);
  ASSERT_EQ(rdzv_kv_get(e.rv, "job", "cnt", &a, 0, NULL), 0);
  ASSERT_EQ(memcmp(a.value, "3", 1), 0);
  ASSERT_EQ(rdzv_kv_add(e.rv, "job", "k", 1, &n), RDZV_ENOT_A_COUNTER);
  ASSERT_EQ(rdzv_kv_add(e.rv, "job", "cnt", INT64_MAX, &n), RDZV_EBAD_REQUEST);
  /* Delete. */
  ASSERT_EQ(rdzv_kv_del(e.rv, "job", "k"), 0);
  ASSERT_EQ(rdzv_kv_del(e.rv, "job", "k"), RDZV_ENO_SUCH_KEY);
  ASSERT_EQ(rdzv_kv_get(e.rv, "job", "k", &a, 0, NULL), RDZV_ENO_SUCH_KEY);
  ASSERT_EQ(rdzv_kv_set(e.rv, "nope", "k", "v", 1, &ver), RDZV_ENO_SUCH_RUN);
  /* Size caps. */
  char *big = mu_calloc(1, RDZV_VALUE_MAX + 1);
  ASSERT_EQ(rdzv_kv_set(e.rv, "job", "big", big, RDZV_VALUE_MAX + 1, &ver), RDZV_ETOO_LARGE);
  ASSERT_EQ(rdzv_kv_set(e.rv, "job", "big", big, RDZV_VALUE_MAX, &ver), 0);
  mu_free(big);
  env_done(&e);
}

/* Issue 15 row 1: every append of the durable state's encoder is checked (a capped buffer
 * refuses the whole blob and is left as it was), and every run's KV together is bounded
 * server-wide so that the state always fits one log record. */
TEST(rdzv__encode_checked_and_total_kv_bounded)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3];
  uint64_t ver = 0;
  cfg(&q, 1, 1, -1);
  join(&e, "job0", &q, "a", &r[0]);
  join(&e, "job1", &q, "a", &r[1]);
  join(&e, "job2", &q, "a", &r[2]);
  char *big = mu_calloc(1, RDZV_VALUE_MAX);
  ASSERT_EQ(rdzv_kv_set(e.rv, "job0", "k", big, 1000, &ver), 0);
  struct mu_buf small = MU_BUF_INIT(600);
  mu_buf_puts(&small, "xy");
  ASSERT_EQ(rdzv_encode(e.rv, &small), MU_E2BIG);
  ASSERT_EQ(small.len, 2);
  ASSERT_STR_EQ(small.data, "xy");
  mu_buf_release(&small);
  struct mu_buf all = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(rdzv_encode(e.rv, &all), 0);
  ASSERT(all.len > 1000);
  mu_buf_release(&all);
  /* --v1-max-bytes bounds all runs together: 1 MiB values spread over runs fill 8 MiB, and
   * then a third run's byte, a new run and a new node are refused; deleting makes room */
  char key[16];
  struct rdzv_limits lim = {8u << 20, 0, 0, 0};
  rdzv_set_limits(e.rv, &lim);
  ASSERT_EQ(rdzv_kv_del(e.rv, "job0", "k"), 0);
  uint32_t stored = 0;
  for (uint32_t i = 0; i < 16; i++) {
    snprintf(key, sizeof(key), "k%u", i);
    int rc = rdzv_kv_set(e.rv, i % 2 ? "job0" : "job1", key, big, RDZV_VALUE_MAX, &ver);
    ASSERT(rc == 0 || rc == RDZV_ETOO_LARGE);
    stored += rc == 0;
  }
  ASSERT_EQ(stored, 7); /* 7 MiB and the runs' own bytes; an 8th MiB would pass 8 MiB */
  uint64_t used = 0, max = 0;
  rdzv_bytes(e.rv, &used, &max);
  ASSERT(used <= max && max == 8u << 20);
  ASSERT_EQ(rdzv_kv_set(e.rv, "job2", "one", big, RDZV_VALUE_MAX, &ver), RDZV_ETOO_LARGE);
  struct mu_buf msg = MU_BUF_INIT(4096);
  struct rec late;
  rec_init(&late);
  lim.max_bytes = used + 100;
  rdzv_set_limits(e.rv, &lim);
  q.node_id = "n";
  ASSERT_EQ(rdzv_join(e.rv, "job-new", &q, &late.w, &msg), RDZV_ETOO_MANY);
  ASSERT(strstr(mu_buf_str(&msg), "--v1-max-bytes") != NULL);
  ASSERT(rdzv_find(e.rv, "job-new") == NULL);
  mu_buf_release(&msg);
  ASSERT_EQ(rdzv_kv_del(e.rv, "job1", "k0"), 0);
  ASSERT_EQ(rdzv_kv_set(e.rv, "job2", "one", "1", 1, &ver), 0);
  /* every byte counted is given back: runs ended and forgotten leave 0 */
  const char *runs[] = {"job0", "job1", "job2"};
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(rdzv_end(e.rv, runs[i], 0, NULL), 0);
  rdzv_gc(e.rv);
  rdzv_bytes(e.rv, &used, &max);
  ASSERT_EQ(used, 0);
  mu_free(big);
  env_done(&e);
}

/* Issue 24: --v1-max-bytes counts memory (up to 4 GiB); the state's encoding is bounded apart,
 * so that it still fits one snapshot record (192 MiB) when the memory bound allows more. */
TEST(rdzv__encoding_bounded_apart_from_memory)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[4];
  uint64_t ver = 0, used = 0, max = 0;
  struct rdzv_limits lim = {RDZV_BYTES_MAX, 0, 0, 0};
  rdzv_set_limits(e.rv, &lim);
  cfg(&q, 1, 1, -1);
  char run[8], key[16];
  char *big = mu_calloc(1, RDZV_VALUE_MAX);
  int rc = 0, stored = 0;
  for (int i = 0; i < 4 && rc == 0; i++) {
    snprintf(run, sizeof(run), "job%d", i);
    join(&e, run, &q, "a", &r[i]);
    for (int k = 0; k < 64 && rc == 0; k++) { /* a run's KV holds at most 64 MiB */
      snprintf(key, sizeof(key), "k%d", k);
      rc = rdzv_kv_set(e.rv, run, key, big, RDZV_VALUE_MAX - 64, &ver);
      stored += rc == 0;
    }
  }
  ASSERT_EQ(rc, RDZV_ETOO_LARGE);
  ASSERT(stored >= 185 && stored <= 192); /* 192 MiB of encoding: not a 4 GiB memory bound */
  rdzv_bytes(e.rv, &used, &max);
  ASSERT(used < max && max == RDZV_BYTES_MAX);
  struct mu_buf all = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(rdzv_encode(e.rv, &all), 0); /* and it encodes */
  ASSERT(all.len <= ((size_t)192 << 20));
  mu_buf_release(&all);
  /* new runs, until one does not fit: refused for the record, not for --v1-max-bytes */
  struct mu_buf msg = MU_BUF_INIT(4096);
  static struct rec more[5000];
  int n = 0;
  for (; n < 5000; n++) {
    snprintf(run, sizeof(run), "r%d", n);
    rec_init(&more[n]);
    q.node_id = "a";
    if (rdzv_join(e.rv, run, &q, &more[n].w, &msg) != 0)
      break;
  }
  ASSERT(n < 5000);
  ASSERT(strstr(mu_buf_str(&msg), "one snapshot record") != NULL);
  mu_buf_release(&msg);
  mu_free(big);
  env_done(&e);
}

TEST(rdzv__close_and_shutdown_answer_everyone)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[2], pend, w, bar, kvw, late;
  struct rdzv_answer a;
  struct mu_buf msg = MU_BUF_INIT(4096);
  cfg(&q, 2, 3, 60000);
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  spin(&e.loop, 1);
  ASSERT_EQ(r[0].fired, 0);
  /* Close with two pending joins. */
  ASSERT_EQ(rdzv_end(e.rv, "job", 0, "done"), 0);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[0].err, RDZV_ERUN_CLOSED);
  ASSERT_EQ(r[1].err, RDZV_ERUN_CLOSED);
  join(&e, "job", &q, "c", &late);
  ASSERT_EQ(late.err, RDZV_ERUN_CLOSED);
  ASSERT(strstr(late.message, "closed: done") != NULL);
  ASSERT_EQ(rdzv_end(e.rv, "job", 0, "again"), 0);
  ASSERT_EQ(rdzv_end(e.rv, "job", 1, "boom"), RDZV_ERUN_CLOSED);
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "a", &a), RDZV_ERUN_CLOSED);

  /* Shut with an active round: watch, barrier, KV wait and a waiting join all answered. */
  cfg(&q, 1, 1, -1);
  join(&e, "job2", &q, "a", &r[0]);
  ASSERT_EQ(r[0].fired, 1);
  join(&e, "job2", &q, "b", &pend);
  rec_init(&w);
  rec_init(&bar);
  rec_init(&kvw);
  ASSERT_EQ(rdzv_watch(e.rv, "job2", "a", 1, 10000, &w.w), 0);
  ASSERT_EQ(rdzv_barrier(e.rv, "job2", "b", 2, 10000, "x", &bar.w, msgbuf(&msg)), 0);
  ASSERT_EQ(rdzv_kv_get(e.rv, "job2", "k", &a, 10000, &kvw.w), 1);
  ASSERT_EQ(w.fired + bar.fired + kvw.fired + pend.fired, 0);
  ASSERT_EQ(rdzv_end(e.rv, "job2", 1, "worker 3 failed"), 0);
  ASSERT_STR_EQ(w.event, "shut");
  ASSERT_EQ(bar.err, RDZV_ERUN_SHUT);
  ASSERT_EQ(kvw.err, RDZV_ERUN_SHUT);
  ASSERT_EQ(pend.err, RDZV_ERUN_SHUT);
  ASSERT(strstr(pend.message, "worker 3 failed") != NULL);
  rec_init(&w);
  ASSERT_EQ(rdzv_watch(e.rv, "job2", "a", 1, 10000, &w.w), 0);
  ASSERT_STR_EQ(w.event, "shut");
  struct rdzv_stats st;
  rdzv_stats(e.rv, &st);
  ASSERT_EQ(st.pending_joins + st.pending_watches + st.pending_other, 0);
  env_done(&e);
  mu_buf_release(&msg);
}

TEST(rdzv__leave_success_closes_run)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[2], w;
  cfg(&q, 2, 2, -1);
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  rec_init(&w);
  ASSERT_EQ(rdzv_watch(e.rv, "job", "b", 1, 10000, &w.w), 0);
  ASSERT_EQ(rdzv_leave(e.rv, "job", "a", 0, NULL), 0);
  ASSERT_EQ(w.fired, 0);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.state, RDZV_RUN_OPEN);
  ASSERT_EQ(rdzv_leave(e.rv, "job", "b", 0, NULL), 0);
  ASSERT_EQ(w.fired, 1);
  ASSERT_STR_EQ(w.event, "closed");
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.state, RDZV_RUN_CLOSED);
  ASSERT_EQ(rdzv_leave(e.rv, "nope", "b", 0, NULL), RDZV_ENO_SUCH_RUN);
  env_done(&e);
}

TEST(rdzv__gc_removes_finished_and_idle_runs)
{
  struct env e;
  env_init(&e, 60);
  struct rdzv_join_req q;
  struct rec r, r2;
  cfg(&q, 1, 1, -1);
  q.config.lease_ttl_ms = 30;
  join(&e, "done", &q, "a", &r);
  join(&e, "idle", &q, "a", &r2);
  ASSERT_EQ(rdzv_end(e.rv, "done", 0, NULL), 0);
  uint64_t t0 = uv_now(&e.loop);
  spin(&e.loop, 20);
  if (since(&e.loop, t0) < 60)
    ASSERT_NOT_NULL(rdzv_find(e.rv, "done"));
  spin(&e.loop, 150);
  ASSERT_NULL(rdzv_find(e.rv, "done"));
  /* "idle": its only node's lease expired at 30 ms, then 60 ms of nothing. */
  ASSERT_NULL(rdzv_find(e.rv, "idle"));
  /* The id can be reused. */
  join(&e, "done", &q, "a", &r);
  ASSERT_EQ(r.err, 0);
  ASSERT_EQ(r.round, 1);
  struct rdzv_stats st;
  rdzv_stats(e.rv, &st);
  ASSERT_EQ(st.runs, 1);
  env_done(&e);
}

TEST(rdzv__free_answers_pending_waits)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r;
  cfg(&q, 2, 2, -1);
  join(&e, "job", &q, "a", &r);
  env_done(&e);
  ASSERT_EQ(r.fired, 1);
  ASSERT_EQ(r.err, RDZV_ESHUTTING_DOWN);
}

TEST(rdzv__ten_thousand_joins)
{
  struct env e;
  env_init(&e, 0);
  enum { N = 10000 };
  struct rdzv_join_req q;
  struct rec *r = mu_calloc(N, sizeof(*r));
  char id[32];
  cfg(&q, N, N, -1);
  q.with_members = 0;
  for (int i = 0; i < N; i++) {
    snprintf(id, sizeof(id), "node-%d", i);
    ASSERT_EQ(join(&e, "big", &q, id, &r[i]), 0);
    if (i < N - 1)
      ASSERT_EQ(r[i].fired, 0);
  }
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(r[i].fired, 1);
    ASSERT_EQ(r[i].rank, i);
    ASSERT_EQ(r[i].offset, 2 * (uint64_t)i);
  }
  struct rdzv_run *run = rdzv_find(e.rv, "big");
  struct rdzv_run_info info;
  rdzv_run_info(run, &info);
  size_t len = 0;
  const char *j = rdzv_round_members_json(info.last_round, &len);
  ASSERT(len > 10000 * 60);
  ASSERT(strstr(j, "\"node_id\":\"node-9999\"") != NULL);
  mu_free(r);
  env_done(&e);
}

/* -- the /v1 HTTP handlers, through the socket-less feed ------------------------------------ */

#include "http.h"
#include "v1.h"

/* The session of the latest join answer fed: feed() sends it (X-Muster-Session), as a node's
 * client does with its own; the tests of one node need nothing more. */
static char feed_session[RDZV_SESSION_HEX + 1];

/* Feeds one request with `session` as its X-Muster-Session (NULL: none). */
static char *feed_as(struct rv_server *srv, const char *method, const char *target,
                     const char *body, const char *session)
{
  struct mu_buf in = MU_BUF_INIT(1 << 20), out = MU_BUF_INIT(1 << 22);
  int json = body != NULL && strcmp(method, "POST") == 0; /* /v1 POST bodies are JSON */
  mu_buf_printf(&in, "%s %s HTTP/1.1\r\nHost: t\r\n%sContent-Length: %zu\r\n", method, target,
                json ? "Content-Type: application/json\r\n" : "", body ? strlen(body) : 0);
  if (session != NULL)
    mu_buf_printf(&in, "X-Muster-Session: %s\r\n", session);
  mu_buf_printf(&in, "\r\n%s", body ? body : "");
  ASSERT_EQ(rv_server_feed(srv, in.data, in.len, &out), 0);
  mu_buf_release(&in);
  const char *s = out.data != NULL ? strstr(out.data, "\"session\":\"") : NULL;
  if (s != NULL && strlen(s + 11) > RDZV_SESSION_HEX && s[11 + RDZV_SESSION_HEX] == '"') {
    memcpy(feed_session, s + 11, RDZV_SESSION_HEX);
    feed_session[RDZV_SESSION_HEX] = '\0';
  }
  return mu_buf_detach(&out);
}

static char *feed(struct rv_server *srv, const char *method, const char *target, const char *body)
{
  return feed_as(srv, method, target, body, feed_session[0] != '\0' ? feed_session : NULL);
}

static void expect(struct rv_server *srv, const char *method, const char *target, const char *body,
                   const char *status, const char *needle)
{
  char *got = feed(srv, method, target, body);
  if (strstr(got, status) == NULL || (needle && strstr(got, needle) == NULL))
    MU__FAIL("%s %s: want '%s' and '%s', got:\n%s", method, target, status, needle ? needle : "",
             got);
  mu_free(got);
}

static void on_srv_closed(void *data)
{
  *(int *)data = 1;
}

TEST(v1__handlers_and_errors)
{
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  cfg.no_v2 = 1;
  struct rv_server *srv = rv_server_new(&loop, &cfg);
  const char *j1 = "{\"node_id\":\"n1\",\"addr\":\"127.0.0.1\",\"local_world_size\":2,"
                   "\"master_port\":29500,\"min_nodes\":1,\"max_nodes\":1}";
  expect(srv, "POST", "/v1/runs/job/join", j1, "HTTP/1.1 200",
         "\"round\":1,\"node_rank\":0,\"nnodes\":1,\"rank_offset\":0,\"world_size\":2");
  expect(srv, "POST", "/v1/runs/job/join", j1, "HTTP/1.1 200", "\"members\":[{\"node_id\":\"n1\"");
  expect(srv, "POST", "/v1/runs/job/join", "{nope", "HTTP/1.1 400", "not a JSON object");
  expect(srv, "POST", "/v1/runs/job/join", "{\"node_id\":\"n1\",\"min_nodes\":1}", "HTTP/1.1 400",
         "field 'addr' is missing");
  expect(srv, "POST", "/v1/runs/job/join",
         "{\"node_id\":\"n1\",\"addr\":\"a\",\"min_nodes\":\"two\"}", "HTTP/1.1 400",
         "field 'min_nodes' must be an integer");
  expect(srv, "POST", "/v1/runs/job/join",
         "{\"node_id\":\"n1\",\"addr\":\"a\",\"min_nodes\":1e400}", "HTTP/1.1 400",
         "'min_nodes' must be an integer between 1 and");
  expect(srv, "POST", "/v1/runs/job/join", "{\"node_id\":\"n1\",\"addr\":\"a\",\"min_nodes\":1.5}",
         "HTTP/1.1 400", "'min_nodes' must be an integer, got 1.5");
  expect(srv, "POST", "/v1/runs/job/join",
         "{\"node_id\":\"n1\",\"addr\":\"a\",\"min_nodes\":2,\"max_nodes\":2}", "HTTP/1.1 409",
         "config_mismatch");
  expect(srv, "GET", "/v1/runs/job/join", NULL, "HTTP/1.1 405", "use POST");
  expect(srv, "POST", "/v1/runs/bad$id/join", j1, "HTTP/1.1 400", "run id");
  expect(srv, "POST", "/v1/runs/job/heartbeat", "{\"node_id\":\"n1\"}", "HTTP/1.1 200",
         "\"round\":2,\"state\":\"active\"");
  expect(srv, "POST", "/v1/runs/job/heartbeat", "{\"node_id\":\"zz\"}", "HTTP/1.1 404",
         "not_member");
  expect(srv, "GET", "/v1/runs/job/watch?node_id=n1&round=1", NULL, "HTTP/1.1 200",
         "\"event\":\"superseded\"");
  expect(srv, "GET", "/v1/runs/job/watch?node_id=n1", NULL, "HTTP/1.1 400", "'round'");
  expect(srv, "PUT", "/v1/runs/job/kv/addr/0", "10.0.0.1:4000", "HTTP/1.1 200", "\"version\":1");
  expect(srv, "GET", "/v1/runs/job/kv/addr/0", NULL, "HTTP/1.1 200", "\r\n\r\n10.0.0.1:4000");
  expect(srv, "GET", "/v1/runs/job/kv/none", NULL, "HTTP/1.1 404", "no_such_key");
  expect(srv, "POST", "/v1/runs/job/kv/c?add=4", NULL, "HTTP/1.1 200", "{\"value\":4}");
  expect(srv, "POST", "/v1/runs/job/kv/addr/0?add=1", NULL, "HTTP/1.1 409", "not_a_counter");
  expect(srv, "POST", "/v1/runs/job/kv/c", NULL, "HTTP/1.1 400", "?add=N");
  expect(srv, "DELETE", "/v1/runs/job/kv/c", NULL, "HTTP/1.1 200", "deleted");
  expect(srv, "POST", "/v1/runs/job/barrier/b1", "{\"count\":1,\"id\":\"r0\"}", "HTTP/1.1 200",
         "\"generation\":1");
  expect(srv, "POST", "/v1/runs/job/barrier/b1", "{\"id\":\"r0\"}", "HTTP/1.1 400", "'count'");
  expect(srv, "GET", "/v1/runs/job", NULL, "HTTP/1.1 200", "\"round_state\":\"active\"");
  expect(srv, "GET", "/v1/runs", NULL, "HTTP/1.1 200", "{\"runs\":[{\"run_id\":\"job\"");
  expect(srv, "GET", "/v1/runs/job/bogus", NULL, "HTTP/1.1 404", "no endpoint 'bogus'");
  expect(srv, "GET", "/v1/runs/nope", NULL, "HTTP/1.1 404", "no_such_run");
  /* the route table's refusals, in the /v1 shape, with the /v1 checks first */
  expect(srv, "PATCH", "/v1/runs/job/kv/a", NULL, "HTTP/1.1 405",
         "Allow: GET, PUT, DELETE, POST\r\n");
  expect(srv, "PATCH", "/v1/runs/job/kv/a", NULL, "HTTP/1.1 405",
         "PATCH /v1/runs/{run_id}/kv/{key} is not supported; use GET, PUT, DELETE, POST");
  expect(srv, "PATCH", "/v1/runs/bad$id/join", NULL, "HTTP/1.1 400", "run id");
  expect(srv, "GET", "/v1/runs/job/kv/", NULL, "HTTP/1.1 404", "no endpoint 'kv/'");
  expect(srv, "DELETE", "/v1/other", NULL, "HTTP/1.1 404", "no such /v1 endpoint");
  expect(srv, "GET", "/v1/runs/job/", NULL, "HTTP/1.1 200", "\"run_id\":\"job\"");
  /* A join that cannot close is deferred; the feed ends, the client is gone, the join withdrawn. */
  expect(srv, "POST", "/v1/runs/wait/join", "{\"node_id\":\"n1\",\"addr\":\"h\",\"min_nodes\":2}",
         "", NULL);
  struct rdzv_stats st;
  rdzv_stats(v1_rdzv(srv), &st);
  ASSERT_EQ(st.pending_joins, 0);
  expect(srv, "POST", "/v1/runs/job/leave", "{\"node_id\":\"n1\",\"status\":\"maybe\"}",
         "HTTP/1.1 400", "field 'status' must be");
  expect(srv, "POST", "/v1/runs/job/shutdown", "{\"reason\":\"rank 3 failed\"}", "HTTP/1.1 200",
         "\"state\":\"shut\"");
  expect(srv, "POST", "/v1/runs/job/join", j1, "HTTP/1.1 410", "\"reason\":\"rank 3 failed\"");
  expect(srv, "POST", "/v1/runs/job/close", NULL, "HTTP/1.1 410", "already ended as shut");
  int closed = 0;
  rv_server_close(srv, on_srv_closed, &closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(closed, 1);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(rdzv__heartbeats_reorder_leases)
{
  /* Five members; all but n2 heart-beat: only n2 expires, whatever its place in the order. */
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[5];
  struct rdzv_answer hb;
  char id[8];
  cfg(&q, 5, 5, -1);
  /* The lease is long against the 20 ms heartbeat steps, so that a loaded machine that stalls
   * this loop for a while does not expire a live member; the loop waits for n2's expiry. */
  q.config.lease_ttl_ms = 600;
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof(id), "n%d", i);
    join(&e, "job", &q, id, &r[i]);
  }
  ASSERT_EQ(r[4].fired, 1);
  struct rdzv_stats st;
  uv_update_time(&e.loop);
  uint64_t end = uv_now(&e.loop) + 10000;
  do {
    spin(&e.loop, 20);
    for (int i = 4; i >= 0; i--) {
      if (i == 2)
        continue;
      snprintf(id, sizeof(id), "n%d", i);
      ASSERT_EQ(rdzv_heartbeat(e.rv, "job", id, &hb), 0);
    }
    rdzv_stats(e.rv, &st);
  } while (st.leases_expired == 0 && uv_now(&e.loop) < end);
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "n2", &hb), RDZV_ENOT_MEMBER);
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "n0", &hb), 0);
  ASSERT_STR_EQ(hb.state, "broken");
  rdzv_stats(e.rv, &st);
  ASSERT_EQ(st.leases_expired, 1);
  ASSERT_EQ(st.nodes, 4);
  env_done(&e);
}

/* -- an open watch holds its member's lease ------------------------------------------------ */

/* Spins in 5 ms steps until *flag is nonzero or `max_ms` passed. Returns: *flag. */
static int spin_until(uv_loop_t *loop, const int *flag, uint64_t max_ms)
{
  uint64_t end = uv_now(loop) + max_ms;
  while (*flag == 0 && uv_now(loop) < end)
    spin(loop, 5);
  return *flag;
}

static int leases_expired(struct env *e)
{
  struct rdzv_stats st;
  rdzv_stats(e->rv, &st);
  return (int)st.leases_expired;
}

/* Two members a and b of a full round (round 1) with a `ttl` ms lease, each with a watch of
 * round 1 open for `watch_ms`. */
static void two_watching(struct env *e, uint32_t max, int64_t ttl, uint64_t watch_ms,
                         struct rec w[2])
{
  struct rdzv_join_req q;
  struct rec r[2];
  cfg(&q, 2, max, max > 2 ? 0 : -1);
  q.config.lease_ttl_ms = ttl;
  join(e, "job", &q, "a", &r[0]);
  join(e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[1].fired, 1);
  ASSERT_EQ(r[1].round, 1);
  rec_init(&w[0]);
  rec_init(&w[1]);
  ASSERT_EQ(rdzv_watch(e->rv, "job", "a", 1, watch_ms, &w[0].w), 0);
  ASSERT_EQ(rdzv_watch(e->rv, "job", "b", 1, watch_ms, &w[1].w), 0);
  ASSERT_EQ(w[0].fired + w[1].fired, 0);
}

TEST(rdzv__watch_holds_lease_then_timeout_restarts_it)
{
  /* Watches (450 ms) outlive the lease (200 ms) without a heartbeat; when they time out the
   * leases restart with a full TTL, and then run out. */
  struct env e;
  env_init(&e, 0);
  struct rec w[2];
  two_watching(&e, 2, 200, 450, w);
  spin(&e.loop, 300);
  ASSERT_EQ(w[0].fired + w[1].fired, 0);
  ASSERT_EQ(leases_expired(&e), 0);
  ASSERT(spin_until(&e.loop, &w[1].fired, 1000));
  spin_until(&e.loop, &w[0].fired, 100);
  ASSERT_EQ(w[0].fired, 1);
  ASSERT_STR_EQ(w[0].event, "none");
  ASSERT_STR_EQ(w[1].event, "none");
  /* a full TTL from the watch's end, not what was left of the lease when it started */
  spin(&e.loop, 50);
  ASSERT_EQ(leases_expired(&e), 0);
  struct rdzv_answer hb;
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "b", &hb), 0);
  ASSERT_STR_EQ(hb.state, "active");
  /* a's lease runs again: with no heartbeat and no watch it expires and breaks the round */
  int one = 0;
  for (int i = 0; i < 200 && !one; i++) {
    spin(&e.loop, 5);
    one = leases_expired(&e) == 1;
  }
  ASSERT(one);
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "a", &hb), RDZV_ENOT_MEMBER);
  struct rec w2;
  rec_init(&w2);
  ASSERT_EQ(rdzv_watch(e.rv, "job", "a", 1, 10000, &w2.w), 0);
  ASSERT_EQ(w2.fired, 1);
  ASSERT_STR_EQ(w2.event, "broken");
  env_done(&e);
}

TEST(rdzv__watch_cancelled_restarts_lease)
{
  /* The client of a's watch goes away: a's lease restarts with a full TTL and then expires;
   * b, still watching, holds its lease and is told the round broke. */
  struct env e;
  env_init(&e, 0);
  struct rec w[2];
  two_watching(&e, 2, 200, 60000, w);
  spin(&e.loop, 300);
  ASSERT_EQ(leases_expired(&e), 0);
  rdzv_wait_cancel(&w[0].w);
  ASSERT_EQ(w[0].fired, 0);
  struct rdzv_stats st;
  rdzv_stats(e.rv, &st);
  ASSERT_EQ(st.pending_watches, 1);
  spin(&e.loop, 50);
  ASSERT_EQ(leases_expired(&e), 0);
  ASSERT_EQ(w[1].fired, 0);
  ASSERT(spin_until(&e.loop, &w[1].fired, 1000));
  ASSERT_STR_EQ(w[1].event, "broken");
  ASSERT_EQ(leases_expired(&e), 1);
  struct rdzv_answer hb;
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "a", &hb), RDZV_ENOT_MEMBER);
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "b", &hb), 0);
  ASSERT_STR_EQ(hb.state, "broken");
  env_done(&e);
}

TEST(rdzv__watch_answered_restarts_lease_and_run_end_frees_it)
{
  /* Watches held past the TTL are answered "waiting" when a third node joins: the members'
   * leases restart with a full TTL (time to re-join), then run out if they do not. */
  struct env e;
  env_init(&e, 0);
  struct rec w[2];
  two_watching(&e, 3, 200, 60000, w);
  spin(&e.loop, 300);
  ASSERT_EQ(leases_expired(&e), 0);
  struct rdzv_join_req q;
  struct rec rc;
  cfg(&q, 2, 3, 0);
  q.config.lease_ttl_ms = 200;
  ASSERT_EQ(join(&e, "job", &q, "c", &rc), 0);
  ASSERT_EQ(w[0].fired, 1);
  ASSERT_EQ(w[1].fired, 1);
  ASSERT_STR_EQ(w[0].event, "waiting");
  ASSERT_STR_EQ(w[1].event, "waiting");
  spin(&e.loop, 50);
  ASSERT_EQ(leases_expired(&e), 0);
  int two = 0;
  for (int i = 0; i < 200 && !two; i++) {
    spin(&e.loop, 5);
    two = leases_expired(&e) == 2;
  }
  ASSERT(two);
  rdzv_wait_cancel(&rc.w);
  env_done(&e);

  /* The run ends under open watches: they answer "closed"; no lease restarts or expires. */
  env_init(&e, 0);
  two_watching(&e, 2, 200, 60000, w);
  spin(&e.loop, 300);
  ASSERT_EQ(rdzv_end(e.rv, "job", 0, "done"), 0);
  ASSERT_EQ(w[0].fired, 1);
  ASSERT_EQ(w[1].fired, 1);
  ASSERT_STR_EQ(w[0].event, "closed");
  spin(&e.loop, 300);
  ASSERT_EQ(leases_expired(&e), 0);
  struct rdzv_stats st;
  rdzv_stats(e.rv, &st);
  ASSERT_EQ(st.pending_watches, 0);
  env_done(&e);
}

TEST(v1__watch_client_gone_restarts_lease)
{
  /* Over /v1: a parked watch whose client goes away (the feed ends) gives the member back a
   * running lease, which then expires without heartbeats. */
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  cfg.no_v2 = 1;
  struct rv_server *srv = rv_server_new(&loop, &cfg);
  const char *j1 = "{\"node_id\":\"n1\",\"addr\":\"127.0.0.1\",\"local_world_size\":1,"
                   "\"min_nodes\":1,\"max_nodes\":1,\"lease_ttl_ms\":200}";
  expect(srv, "POST", "/v1/runs/job/join", j1, "HTTP/1.1 200", "\"round\":1");
  expect(srv, "GET", "/v1/runs/job/watch?node_id=n1&round=1&timeout_ms=60000", NULL, "", NULL);
  struct rdzv_stats st;
  rdzv_stats(v1_rdzv(srv), &st);
  ASSERT_EQ(st.pending_watches, 0);
  ASSERT_EQ(st.leases_expired, 0);
  for (int i = 0; i < 200 && st.leases_expired == 0; i++) {
    spin(&loop, 5);
    rdzv_stats(v1_rdzv(srv), &st);
  }
  ASSERT_EQ(st.leases_expired, 1);
  expect(srv, "POST", "/v1/runs/job/heartbeat", "{\"node_id\":\"n1\"}", "HTTP/1.1 404",
         "not_member");
  int closed = 0;
  rv_server_close(srv, on_srv_closed, &closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(closed, 1);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* Issue 33 item 7: a node speaks only for itself. Two members of one run, each with its own
 * session from its join answer; one token (here: none) for both. */
static void expect_as(struct rv_server *srv, const char *method, const char *target,
                      const char *body, const char *session, const char *status, const char *needle)
{
  char *got = feed_as(srv, method, target, body, session);
  if (strstr(got, status) == NULL || (needle && strstr(got, needle) == NULL))
    MU__FAIL("%s %s: want '%s' and '%s', got:\n%s", method, target, status, needle ? needle : "",
             got);
  mu_free(got);
}

/* Joins `node` to run "s" (2 nodes, budget 3) with `session` (NULL: none); the join stays
 * pending until the second node comes. Returns: the answer (caller frees). */
static char *join_s(struct rv_server *srv, const char *node, const char *session)
{
  char body[256];
  snprintf(body, sizeof(body),
           "{\"node_id\":\"%s\",\"addr\":\"127.0.0.1\",\"min_nodes\":2,\"max_nodes\":2,"
           "\"max_restarts\":3,\"last_call_ms\":0}",
           node);
  return feed_as(srv, "POST", "/v1/runs/s/join", body, session);
}

static uint32_t run_restarts(struct rv_server *srv, const char *run_id)
{
  struct rdzv_run_info i;
  rdzv_run_info(rdzv_find(v1_rdzv(srv), run_id), &i);
  return i.restarts;
}

TEST(v1__a_node_speaks_only_for_itself)
{
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  struct rv_server_config scfg;
  rv_server_config_init(&scfg);
  scfg.no_v2 = 1;
  struct rv_server *srv = rv_server_new(&loop, &scfg);
  /* a and b join (through the state machine: one feed answers one request at a time); each
   * answer carries the node's own session */
  struct rdzv_join_req q;
  struct rec ra, rb;
  rec_init(&ra);
  rec_init(&rb);
  cfg(&q, 2, 2, 0);
  q.config.max_restarts = 3;
  struct mu_buf msg = MU_BUF_INIT(4096);
  q.node_id = "a";
  ASSERT_EQ(rdzv_join(v1_rdzv(srv), "s", &q, &ra.w, msgbuf(&msg)), 0);
  q.node_id = "b";
  ASSERT_EQ(rdzv_join(v1_rdzv(srv), "s", &q, &rb.w, msgbuf(&msg)), 0);
  ASSERT(ra.fired == 1 && rb.fired == 1);
  ASSERT_EQ(strlen(ra.session), RDZV_SESSION_HEX);
  ASSERT_EQ(strlen(rb.session), RDZV_SESSION_HEX);
  ASSERT(strcmp(ra.session, rb.session) != 0);
  const char *fail_a = "{\"node_id\":\"a\",\"round\":1,\"event\":\"failed\",\"reason\":\"x\"}";
  /* b's session, no session, a malformed one: 403 naming the problem and the fix, no restart */
  expect_as(srv, "POST", "/v1/runs/s/report", fail_a, rb.session, "HTTP/1.1 403",
            "the session sent is not this node's; send header 'X-Muster-Session'");
  expect_as(srv, "POST", "/v1/runs/s/report", fail_a, NULL, "HTTP/1.1 403",
            "\"error\":\"wrong_session\",\"message\":\"node 'a' of run 's' speaks only for "
            "itself: no session was sent");
  expect_as(srv, "POST", "/v1/runs/s/report", fail_a, "", "HTTP/1.1 403", "no session was sent");
  char longer[RDZV_SESSION_HEX + 2];
  snprintf(longer, sizeof(longer), "%s0", ra.session); /* its session and one more digit */
  expect_as(srv, "POST", "/v1/runs/s/report", fail_a, longer, "HTTP/1.1 403", "not this node's");
  ASSERT_EQ(run_restarts(srv, "s"), 0);
  /* every call that names a: leave, heartbeat, watch, health, re-join; none changes a thing */
  expect_as(srv, "POST", "/v1/runs/s/leave", "{\"node_id\":\"a\",\"status\":\"failed\"}",
            rb.session, "HTTP/1.1 403", "wrong_session");
  expect_as(srv, "POST", "/v1/runs/s/heartbeat", "{\"node_id\":\"a\"}", NULL, "HTTP/1.1 403",
            "wrong_session");
  expect_as(srv, "GET", "/v1/runs/s/watch?node_id=a&round=1&lost_on_close=1", NULL, rb.session,
            "HTTP/1.1 403", "wrong_session");
  expect_as(srv, "POST", "/v1/runs/s/health",
            "{\"node_id\":\"a\",\"addr\":\"h\",\"min_nodes\":2,\"max_nodes\":2,\"healthy\":false}",
            NULL, "HTTP/1.1 403", "wrong_session");
  char *got = join_s(srv, "a", rb.session);
  ASSERT(strstr(got, "HTTP/1.1 403") != NULL && strstr(got, "wrong_session") != NULL);
  mu_free(got);
  struct rdzv_run_info i;
  rdzv_run_info(rdzv_find(v1_rdzv(srv), "s"), &i);
  ASSERT_EQ(i.round_state, RDZV_ROUND_ACTIVE);
  ASSERT_EQ(i.nnodes, 2);
  ASSERT_EQ(i.unhealthy, 0);
  struct rdzv_stats st;
  rdzv_stats(v1_rdzv(srv), &st);
  ASSERT_EQ(st.wrong_sessions, 9);
  expect(srv, "GET", "/metrics", NULL, "HTTP/1.1 200", "muster_rdzv_wrong_sessions_total 9\n");
  /* no GET shows a session */
  got = feed_as(srv, "GET", "/v1/runs/s", NULL, NULL);
  ASSERT(strstr(got, ra.session) == NULL && strstr(got, rb.session) == NULL);
  ASSERT(strstr(got, "session") == NULL);
  mu_free(got);
  /* the nodes' own calls work: a heartbeat, then a's own failure report counts one restart */
  expect_as(srv, "POST", "/v1/runs/s/heartbeat", "{\"node_id\":\"b\"}", rb.session, "HTTP/1.1 200",
            "\"state\":\"active\"");
  expect_as(srv, "POST", "/v1/runs/s/report", fail_a, ra.session, "HTTP/1.1 200",
            "\"counted\":true,\"restart_count\":1");
  ASSERT_EQ(run_restarts(srv, "s"), 1);
  /* a node the run does not hold is not checked: the call answers for it */
  expect_as(srv, "POST", "/v1/runs/s/report",
            "{\"node_id\":\"zz\",\"round\":1,\"event\":\"failed\"}", NULL, "HTTP/1.1 404",
            "not_member");
  /* a re-join with its own session keeps it: the same session in the new answer */
  got = join_s(srv, "a", ra.session); /* pending (b not back yet): the feed ends, withdrawn */
  ASSERT(strstr(got, "403") == NULL);
  mu_free(got);
  ASSERT_EQ(rdzv_session_check(v1_rdzv(srv), "s", "a", ra.session, 0, msgbuf(&msg)), 0);
  ASSERT_EQ(rdzv_session_check(v1_rdzv(srv), "s", "a", rb.session, 0, msgbuf(&msg)),
            RDZV_EWRONG_SESSION);
  ASSERT_EQ(rdzv_session_check(v1_rdzv(srv), "s", "nobody", NULL, 0, msgbuf(&msg)), 0);
  ASSERT_EQ(rdzv_session_check(v1_rdzv(srv), "none", "a", NULL, 0, msgbuf(&msg)), 0);
  /* a member lost (its lost_on_close watch's connection closed) may still leave with success:
   * with its own session only */
  const char *jx = "{\"node_id\":\"x\",\"addr\":\"h\",\"min_nodes\":1,\"max_nodes\":1}";
  expect_as(srv, "POST", "/v1/runs/t/join", jx, NULL, "HTTP/1.1 200", "\"session\":\"");
  char sx[RDZV_SESSION_HEX + 1];
  memcpy(sx, feed_session, sizeof(sx));
  expect_as(srv, "GET", "/v1/runs/t/watch?node_id=x&round=1&timeout_ms=60000&lost_on_close=1", NULL,
            sx, "", NULL);
  expect(srv, "GET", "/v1/runs/t", NULL, "HTTP/1.1 200", "\"end\":\"lost\"");
  const char *leave_x = "{\"node_id\":\"x\",\"status\":\"succeeded\"}";
  expect_as(srv, "POST", "/v1/runs/t/leave", leave_x, rb.session, "HTTP/1.1 403", "wrong_session");
  expect_as(srv, "POST", "/v1/runs/t/leave", leave_x, sx, "HTTP/1.1 200", "\"state\":\"closed\"");
  mu_buf_release(&msg);
  int closed = 0;
  rv_server_close(srv, on_srv_closed, &closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(closed, 1);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* Timed waits for the deadline tests: each records when it fired, and in which order. */
struct timed {
  struct rdzv_wait w;
  uv_loop_t *loop;
  int *seq;
  int order; /* 1, 2, ...: the order it fired in; 0: not fired */
  int err;
  uint64_t fired_at, due;
};

static void on_timed(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct timed *t = w->data;
  t->order = ++*t->seq;
  t->err = a->err;
  t->fired_at = uv_now(t->loop);
}

static void timed_get(struct env *e, struct timed *t, int *seq, const char *key, uint64_t ms)
{
  memset(t, 0, sizeof(*t));
  t->w.cb = on_timed;
  t->w.data = t;
  t->loop = &e->loop;
  t->seq = seq;
  t->due = uv_now(&e->loop) + ms;
  struct rdzv_answer a;
  ASSERT_EQ(rdzv_kv_get(e->rv, "job", key, &a, ms, &t->w), 1);
}

/* Spins until `n` waits fired (or 5 s). */
static void spin_fired(struct env *e, const int *seq, int n)
{
  for (int i = 0; i < 500 && *seq < n; i++)
    spin(&e->loop, 10);
  ASSERT_EQ(*seq, n);
}

/* A rendezvous with run "job" of one node, its round closed: a run to hang KV waits on. */
static void env_one_node_run(struct env *e)
{
  env_init(e, 0);
  struct rdzv_join_req q;
  struct rec r;
  cfg(&q, 1, 1, -1);
  join(e, "job", &q, "a", &r);
  ASSERT_EQ(r.fired, 1);
}

TEST(rdzv__deadlines_fire_in_order_across_durations)
{
  /* 40 waits over 12 durations (more than the FIFOs kept at once: some go to the heap), set in
   * two waves; some withdrawn. Each that stays fires once, never before its deadline, in the
   * order of the deadlines whatever queue holds it (several due at once on a loaded machine
   * still come out in order); a withdrawn one never fires. */
  struct env e;
  env_one_node_run(&e);
  enum { N = 40 };
  static struct timed t[N];
  int seq = 0, kept = 0;
  uv_update_time(&e.loop);
  for (int i = 0; i <= N; i++) {
    if (i == N / 2 || i == N) {
      /* withdrawn before the loop runs (so before any can fire): heads, middles, tails */
      for (int j = i - N / 2; j < i; j++)
        if (j % 5 == 0)
          rdzv_wait_cancel(&t[j].w);
        else
          kept++;
      if (i == N)
        break;
      spin(&e.loop, 15); /* the second wave: later deadlines of the same durations */
    }
    timed_get(&e, &t[i], &seq, "never", 30 + (uint64_t)(i * 7 % 12) * 15);
  }
  spin_fired(&e, &seq, kept);
  spin(&e.loop, 20);
  ASSERT_EQ(seq, kept);
  for (int i = 0; i < N; i++) {
    if (i % 5 == 0) {
      ASSERT_EQ(t[i].order, 0);
      continue;
    }
    ASSERT(t[i].order > 0);
    ASSERT_EQ(t[i].err, RDZV_EKV_TIMEOUT);
    ASSERT(t[i].fired_at >= t[i].due);
    for (int j = 0; j < N; j++)
      if (j % 5 != 0 && t[j].due < t[i].due)
        ASSERT(t[j].order < t[i].order);
  }
  env_done(&e);
}

TEST(rdzv__deadline_fifo_reused_and_head_withdrawn)
{
  /* One duration: the FIFO's head withdrawn, the next fires at its own time; once the FIFO is
   * empty another duration takes it, and a short wait set later fires before a long one set
   * earlier. */
  struct env e;
  env_one_node_run(&e);
  struct timed t[4];
  int seq = 0;
  uv_update_time(&e.loop);
  timed_get(&e, &t[0], &seq, "k", 40);
  timed_get(&e, &t[1], &seq, "k", 40);
  rdzv_wait_cancel(&t[0].w);
  spin_fired(&e, &seq, 1);
  ASSERT_EQ(t[0].order, 0);
  ASSERT_EQ(t[1].order, 1);
  ASSERT(t[1].fired_at >= t[1].due);
  uv_update_time(&e.loop);
  timed_get(&e, &t[2], &seq, "k", 200);
  spin(&e.loop, 10);
  uv_update_time(&e.loop);
  timed_get(&e, &t[3], &seq, "k", 20);
  spin_fired(&e, &seq, 3);
  ASSERT_EQ(t[3].order, 2);
  ASSERT_EQ(t[2].order, 3);
  ASSERT(t[2].fired_at >= t[2].due);
  ASSERT(t[3].fired_at >= t[3].due);
  /* a value set wakes a waiter at once and takes it off its FIFO */
  timed_get(&e, &t[0], &seq, "k", 30);
  uint64_t v;
  ASSERT_EQ(rdzv_kv_set(e.rv, "job", "k", "x", 1, &v), 0);
  ASSERT_EQ(t[0].order, 4);
  ASSERT_EQ(t[0].err, 0);
  spin(&e.loop, 60);
  ASSERT_EQ(seq, 4);
  env_done(&e);
}

/* -- goodput: reports, the run's restart budget, standbys, health, timings ------------------ */

static int report(struct env *e, const char *node, uint64_t round, enum rdzv_report_kind k,
                  struct rdzv_report_answer *a)
{
  struct mu_buf msg = MU_BUF_INIT(4096);
  int rc = rdzv_report(e->rv, "job", node, round, k, "rank 3 failed: exit code 1", a, &msg);
  mu_buf_release(&msg);
  return rc;
}

/* The run's GET /v1/runs/{id} goodput part. Ownership: caller frees. */
static char *goodput_json(struct env *e)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  rdzv_run_goodput_json(rdzv_find(e->rv, "job"), &b);
  return mu_buf_detach(&b);
}

TEST(rdzv__failure_counts_once_per_round_and_the_budget_is_the_runs)
{
  /* max_restarts 1 for the run: a's failure in round 1 counts (both nodes' next round has
   * restart count 1), b's report of the same round does not; b's failure in round 2 finds no
   * restart left and shuts the run. */
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[2];
  struct rdzv_report_answer a;
  cfg(&q, 2, 2, -1);
  q.config.max_restarts = 1;
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].fired, 1);
  ASSERT_EQ(report(&e, "a", 1, RDZV_REPORT_FAILED, &a), 0);
  ASSERT_EQ(a.counted, 1);
  ASSERT_EQ(a.restart_count, 1);
  ASSERT_EQ(a.max_restarts, 1);
  ASSERT_STR_EQ(a.round_state, "broken");
  ASSERT_EQ(report(&e, "b", 1, RDZV_REPORT_FAILED, &a), 0);
  ASSERT_EQ(a.counted, 0);
  ASSERT_EQ(a.restart_count, 1);
  /* an agent that restarts (b's join gives no budget: it keeps the run's) */
  q.config.max_restarts = -1;
  join(&e, "job", &q, "b", &r[1]);
  q.config.max_restarts = 1;
  join(&e, "job", &q, "a", &r[0]);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[0].round, 2);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.restarts, 1);
  ASSERT_EQ(report(&e, "b", 2, RDZV_REPORT_HUNG, &a), 0);
  ASSERT_EQ(a.counted, 1);
  /* the shut waits until the next round could close: a member lost first would call it off
   * (the loss caused the failure, issue 30 item 4); both re-join, so it stands */
  ASSERT_STR_EQ(a.state, "open");
  ASSERT_STR_EQ(a.round_state, "broken");
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].fired, 0);
  join(&e, "job", &q, "a", &r[0]);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[0].err, RDZV_ERUN_SHUT);
  ASSERT_EQ(r[1].err, RDZV_ERUN_SHUT);
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.state, RDZV_RUN_SHUT);
  ASSERT(strstr(info.reason, "no restart left") != NULL);
  ASSERT(strstr(info.reason, "rank 3 failed") != NULL);
  struct mu_buf msg = MU_BUF_INIT(4096);
  ASSERT_EQ(rdzv_report(e.rv, "job", "a", 2, RDZV_REPORT_FAILED, NULL, &a, &msg), RDZV_ERUN_SHUT);
  mu_buf_release(&msg);
  char *j = goodput_json(&e);
  ASSERT(strstr(j, "\"end\":\"failed\",\"counted\":true") != NULL);
  ASSERT(strstr(j, "\"round\":2,") != NULL);
  /* round 2 ended on the hang, which found no restart to count; the run was shut after */
  ASSERT(strstr(j, "\"end\":\"hung\",\"counted\":false") != NULL);
  mu_free(j);
  env_done(&e);
}

TEST(rdzv__a_failure_during_a_scale_up_is_no_restart)
{
  /* 2:3 nodes, no restart: c comes while round 1 (a, b) runs, so a and b are told "waiting"
   * and stop their workers to take it in; a worker of a that fails because b's stopped first
   * is reported, and counts nothing (the run was shut by it in rdzv_backends' elastic case). */
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3];
  struct rdzv_report_answer a;
  cfg(&q, 2, 3, 0);
  q.config.max_restarts = 0;
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].fired, 1);
  join(&e, "job", &q, "c", &r[2]);
  ASSERT_EQ(r[2].fired, 0);
  ASSERT_EQ(report(&e, "a", 1, RDZV_REPORT_FAILED, &a), 0);
  ASSERT_EQ(a.counted, 0);
  ASSERT(strcmp(a.state, "shut") != 0);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.restarts, 0);
  env_done(&e);
}

TEST(rdzv__restart_budget_config_and_the_join_answer)
{
  /* The first node that names a budget sets it; another budget is a config mismatch; a join
   * answer carries the run's restart count. */
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3];
  cfg(&q, 2, 2, -1);
  q.config.max_restarts = -1;
  join(&e, "job", &q, "a", &r[0]);
  q.config.max_restarts = 3;
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].fired, 1);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.max_restarts, 3);
  q.config.max_restarts = 2;
  join(&e, "job", &q, "c", &r[2]);
  ASSERT_EQ(r[2].fired, 1);
  ASSERT_EQ(r[2].err, RDZV_ECONFIG_MISMATCH);
  ASSERT(strstr(r[2].message, "max_restarts 3") != NULL);
  q.config.max_restarts = 1000001;
  struct mu_buf msg = MU_BUF_INIT(4096);
  rec_init(&r[2]);
  q.node_id = "d";
  ASSERT_EQ(rdzv_join(e.rv, "job", &q, &r[2].w, &msg), RDZV_EBAD_REQUEST);
  mu_buf_release(&msg);
  env_done(&e);
}

TEST(rdzv__a_standby_takes_a_failed_members_place)
{
  /* Three nodes for max 2: c waits as a standby (shown as such). b's workers fail: the next
   * round is a and c at the same world size, closed as soon as both joined; b waits. */
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3];
  struct rdzv_report_answer a;
  cfg(&q, 2, 2, -1);
  q.config.max_restarts = 5;
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  join(&e, "job", &q, "c", &r[2]);
  ASSERT_EQ(r[2].fired, 0);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.standbys, 1);
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  rdzv_run_detail_json(rdzv_find(e.rv, "job"), &b);
  ASSERT(strstr(mu_buf_str(&b), "\"node_id\":\"c\",\"state\":\"standby\"") != NULL);
  mu_buf_release(&b);
  ASSERT_EQ(report(&e, "b", 1, RDZV_REPORT_FAILED, &a), 0);
  ASSERT_EQ(a.counted, 1);
  join(&e, "job", &q, "b", &r[1]); /* the failed node re-joins first ... */
  ASSERT_EQ(r[1].fired, 0);        /* (b and c: 2 candidates, but a survivor is missing) */
  join(&e, "job", &q, "a", &r[0]);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[2].fired, 1); /* ... the standby takes its place */
  ASSERT_EQ(r[1].fired, 0);
  ASSERT_EQ(r[0].round, 2);
  ASSERT_EQ(r[0].rank, 0);
  ASSERT_EQ(r[2].rank, 1);
  ASSERT_EQ(r[2].world, 4);
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.standbys, 1); /* b now */
  env_done(&e);
}

TEST(rdzv__a_closed_watch_loses_its_member_at_once)
{
  /* A watch asked with RDZV_WAIT_LOST_ON_CLOSE whose connection closes: its member is lost
   * now, not one lease later; the other member's watch says broken and the standby's round
   * closes as soon as the survivor re-joins. The loss is not a restart. */
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[3], w[2];
  cfg(&q, 2, 2, -1);
  q.config.max_restarts = 0;
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  join(&e, "job", &q, "c", &r[2]);
  for (int i = 0; i < 2; i++) {
    rec_init(&w[i]);
    w[i].w.flags = RDZV_WAIT_LOST_ON_CLOSE;
    ASSERT_EQ(rdzv_watch(e.rv, "job", i ? "b" : "a", 1, 60000, &w[i].w), 0);
  }
  rdzv_wait_gone(&w[1].w);
  ASSERT_EQ(w[1].fired, 0);
  ASSERT_EQ(w[0].fired, 1);
  ASSERT_STR_EQ(w[0].event, "broken");
  struct rdzv_answer hb;
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "b", &hb), RDZV_ENOT_MEMBER);
  join(&e, "job", &q, "a", &r[0]);
  ASSERT_EQ(r[0].fired, 1);
  ASSERT_EQ(r[2].fired, 1);
  ASSERT_EQ(r[2].round, 2);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.restarts, 0);
  char *j = goodput_json(&e);
  ASSERT(strstr(j, "\"end\":\"lost\",\"counted\":false") != NULL);
  mu_free(j);
  /* without the flag a closed watch only restarts the lease (as before) */
  rec_init(&w[0]);
  ASSERT_EQ(rdzv_watch(e.rv, "job", "a", 2, 60000, &w[0].w), 0);
  rdzv_wait_gone(&w[0].w);
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "a", &hb), 0);
  ASSERT_STR_EQ(hb.state, "active");
  env_done(&e);
}

TEST(rdzv__unhealthy_nodes_are_kept_with_their_output)
{
  /* A failed check creates the run and is kept with its output for its TTL; a member that
   * becomes unhealthy is lost (its round breaks); a join or a passing check forgets it. */
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[2];
  struct mu_buf msg = MU_BUF_INIT(4096);
  uint32_t sick = 0;
  cfg(&q, 2, 2, -1);
  q.node_id = "x";
  ASSERT_EQ(rdzv_health(e.rv, "job", &q, 0, "GPU 3: ECC error\nsecond line", 150, &sick, &msg), 0);
  ASSERT_EQ(sick, 1);
  char *j = goodput_json(&e);
  ASSERT(strstr(j, "\"unhealthy\":[{\"node_id\":\"x\",\"output\":\"GPU 3: ECC error\\nsecond "
                   "line\"") != NULL);
  mu_free(j);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.unhealthy, 1);
  spin(&e.loop, 200); /* its agent stopped reporting: forgotten */
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.unhealthy, 0);
  /* a member's failed check breaks its round */
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].fired, 1);
  q.node_id = "b";
  ASSERT_EQ(rdzv_health(e.rv, "job", &q, 0, "disk full", 0, &sick, &msg), 0);
  struct rdzv_answer hb;
  ASSERT_EQ(rdzv_heartbeat(e.rv, "job", "a", &hb), 0);
  ASSERT_STR_EQ(hb.state, "broken");
  j = goodput_json(&e);
  ASSERT(strstr(j, "\"end\":\"unhealthy\"") != NULL);
  mu_free(j);
  ASSERT_EQ(rdzv_health(e.rv, "job", &q, 1, NULL, 0, &sick, &msg), 0);
  ASSERT_EQ(sick, 0);
  /* another config is refused as a join would be */
  cfg(&q, 3, 3, -1);
  q.node_id = "y";
  ASSERT_EQ(rdzv_health(e.rv, "job", &q, 0, "x", 0, &sick, msgbuf(&msg)), RDZV_ECONFIG_MISMATCH);
  mu_buf_release(&msg);
  env_done(&e);
}

TEST(rdzv__timings_of_each_round_and_the_downtime_of_a_restart)
{
  struct env e;
  env_init(&e, 0);
  struct rdzv_join_req q;
  struct rec r[2];
  struct rdzv_report_answer a;
  cfg(&q, 2, 2, -1);
  q.config.max_restarts = 2;
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(report(&e, "a", 1, RDZV_REPORT_STARTED, &a), 0);
  char *j = goodput_json(&e);
  ASSERT(strstr(j, "\"started_ms\":null") != NULL); /* one of two nodes */
  ASSERT(strstr(j, "\"time_to_first_step_ms\":null") != NULL);
  mu_free(j);
  ASSERT_EQ(report(&e, "a", 1, RDZV_REPORT_STARTED, &a), 0); /* a repeat counts once */
  ASSERT_EQ(report(&e, "b", 1, RDZV_REPORT_STARTED, &a), 0);
  ASSERT_EQ(report(&e, "b", 1, RDZV_REPORT_PROGRESS, &a), 0);
  j = goodput_json(&e);
  ASSERT(strstr(j, "\"started_ms\":null") == NULL);
  ASSERT(strstr(j, "\"time_to_first_step_ms\":null") == NULL);
  ASSERT(strstr(j, "\"downtime_ms\":null,\"end\":\"\"") != NULL);
  long first = 0; /* the run's first progress: round 1's, never a later round's */
  const char *fp = strstr(j, "\"timings\":{");
  ASSERT(fp != NULL && (fp = strstr(fp, "\"first_progress_ms\":")) != NULL);
  ASSERT(sscanf(fp, "\"first_progress_ms\":%ld", &first) == 1 && first > 0);
  mu_free(j);
  ASSERT_EQ(report(&e, "b", 1, RDZV_REPORT_FAILED, &a), 0);
  uv_sleep(20);
  join(&e, "job", &q, "a", &r[0]);
  join(&e, "job", &q, "b", &r[1]);
  ASSERT_EQ(r[1].round, 2);
  ASSERT_EQ(report(&e, "a", 2, RDZV_REPORT_PROGRESS, &a), 0);
  j = goodput_json(&e);
  const char *r2 = strstr(j, "{\"round\":2,");
  ASSERT(r2 != NULL);
  ASSERT(strstr(r2, "\"downtime_ms\":null") == NULL);
  long down = 0;
  const char *d = strstr(r2, "\"downtime_ms\":");
  ASSERT(d != NULL && sscanf(d, "\"downtime_ms\":%ld", &down) == 1);
  ASSERT(down >= 20);
  ASSERT(strstr(r2, "\"restart_count\":1") != NULL);
  long again = 0;
  fp = strstr(j, "\"timings\":{");
  ASSERT(fp != NULL && (fp = strstr(fp, "\"first_progress_ms\":")) != NULL);
  ASSERT(sscanf(fp, "\"first_progress_ms\":%ld", &again) == 1);
  ASSERT_EQ(again, first); /* round 2's progress came 20 ms later and changed nothing */
  mu_free(j);
  env_done(&e);
}

TEST(v1__goodput_report_health_and_lost_on_close)
{
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  cfg.no_v2 = 1;
  struct rv_server *srv = rv_server_new(&loop, &cfg);
  const char *j1 = "{\"node_id\":\"n1\",\"addr\":\"127.0.0.1\",\"local_world_size\":1,"
                   "\"min_nodes\":1,\"max_nodes\":1,\"max_restarts\":2}";
  expect(srv, "POST", "/v1/runs/job/join", j1, "HTTP/1.1 200",
         "\"restart_count\":0,\"max_restarts\":2");
  expect(srv, "POST", "/v1/runs/job/join",
         "{\"node_id\":\"n1\",\"addr\":\"a\",\"min_nodes\":1,\"max_restarts\":-2}", "HTTP/1.1 400",
         "'max_restarts' must be an integer between 0 and");
  expect(srv, "POST", "/v1/runs/job/report",
         "{\"node_id\":\"n1\",\"round\":2,\"event\":\"exploded\"}", "HTTP/1.1 400",
         "field 'event' must be \\\"started\\\", \\\"progress\\\", \\\"failed\\\" or \\\"hung\\\", "
         "got \\\"exploded\\\"");
  expect(srv, "POST", "/v1/runs/job/report", "{\"node_id\":\"n1\",\"event\":\"started\"}",
         "HTTP/1.1 400", "field 'round' is missing");
  expect(srv, "POST", "/v1/runs/job/report", "{\"node_id\":\"zz\",\"round\":2,\"event\":\"hung\"}",
         "HTTP/1.1 404", "not_member");
  expect(srv, "POST", "/v1/runs/nope/report", "{\"node_id\":\"n1\",\"round\":2,\"event\":\"hung\"}",
         "HTTP/1.1 404", "no_such_run");
  /* the agents' progress lines (two nodes of round 1, one of round 9 that is not kept, the
   * round's counter) fold into round 1's steps; auto's value in use is in the timings */
  expect(srv, "PUT", "/v1/runs/job/kv/muster.progress.1.0",
         "5000 step 40 checkpoint 25 first 1 1000 total 500", "HTTP/1.1 200", "\"version\"");
  expect(srv, "PUT", "/v1/runs/job/kv/muster.progress.1.1",
         "5200 step 42 checkpoint -1 first 3 1100 total -1", "HTTP/1.1 200", "\"version\"");
  expect(srv, "PUT", "/v1/runs/job/kv/muster.progress.9.0", "9000 step 900 checkpoint 800",
         "HTTP/1.1 200", "\"version\"");
  expect(srv, "POST", "/v1/runs/job/kv/muster.progress.1?add=7", NULL, "HTTP/1.1 200", "7");
  expect(srv, "PUT", "/v1/runs/job/kv/muster.hang_timeout_auto", "2500", "HTTP/1.1 200",
         "\"version\"");
  expect(srv, "GET", "/v1/runs/job", NULL, "HTTP/1.1 200",
         "\"steps\":{\"step\":42,\"step_ms\":5200,\"first_step\":1,\"first_step_ms\":1000,"
         "\"checkpoint\":25,\"total\":500}}]");
  expect(srv, "GET", "/v1/runs/job", NULL, "HTTP/1.1 200", "\"hang_timeout_auto_ms\":2500,");
  /* the run's goodput (its wall time from its creation) with its timeline, and in /metrics */
  expect(srv, "GET", "/v1/runs/job", NULL, "HTTP/1.1 200", "\"goodput\":{\"wall_ms\":");
  expect(srv, "GET", "/v1/runs/job", NULL, "HTTP/1.1 200", "\"timeline\":[");
  expect(srv, "GET", "/metrics", NULL, "HTTP/1.1 200",
         "muster_goodput_badput_seconds{run=\"job\",category=\"wasted_progress\"} ");
  expect(srv, "GET", "/metrics", NULL, "HTTP/1.1 200",
         "muster_goodput_productive_seconds{run=\"job\"} ");
  expect(srv, "POST", "/v1/runs/job/report",
         "{\"node_id\":\"n1\",\"round\":1,\"event\":\"failed\",\"reason\":\"rank 0: exit 1\"}",
         "HTTP/1.1 200",
         "\"round_state\":\"broken\",\"counted\":true,\"restart_count\":1,\"max_restarts\":2}");
  expect(srv, "POST", "/v1/runs/job/health", "{\"node_id\":\"n9\",\"addr\":\"h\",\"min_nodes\":1}",
         "HTTP/1.1 400", "field 'healthy' is missing");
  expect(srv, "POST", "/v1/runs/job/health",
         "{\"node_id\":\"n9\",\"addr\":\"h\",\"min_nodes\":1,\"healthy\":false,\"output\":\"no "
         "GPU\\n\"}",
         "HTTP/1.1 200", "\"state\":\"open\",\"unhealthy\":1}");
  expect(srv, "GET", "/v1/runs", NULL, "HTTP/1.1 200",
         "\"standbys\":0,\"unhealthy\":1,\"restart_count\":1}");
  expect(srv, "GET", "/v1/runs/job", NULL, "HTTP/1.1 200", "\"output\":\"no GPU\\n\"");
  expect(srv, "GET", "/v1/runs/job", NULL, "HTTP/1.1 200",
         "\"end\":\"failed\",\"counted\":true,\"why\":\"node 'n1': rank 0: exit "
         "1\",\"steps\":{\"step\":42,");
  expect(srv, "POST", "/v1/runs/job/health",
         "{\"node_id\":\"n9\",\"addr\":\"h\",\"min_nodes\":2,\"healthy\":false}", "HTTP/1.1 409",
         "config_mismatch");
  /* round 2: a watch that holds the member and says lost_on_close; its client goes away */
  expect(srv, "POST", "/v1/runs/job/join", j1, "HTTP/1.1 200", "\"round\":2");
  expect(srv, "GET", "/v1/runs/job/watch?node_id=n1&round=2&lost_on_close=2", NULL, "HTTP/1.1 400",
         "lost_on_close");
  expect(srv, "GET", "/v1/runs/job/watch?node_id=n1&round=2&timeout_ms=60000&lost_on_close=1", NULL,
         "", NULL);
  expect(srv, "POST", "/v1/runs/job/heartbeat", "{\"node_id\":\"n1\"}", "HTTP/1.1 404",
         "not_member");
  expect(
      srv, "GET", "/v1/runs/job", NULL, "HTTP/1.1 200",
      "\"end\":\"lost\",\"counted\":false,\"why\":\"node 'n1' was lost (its connection closed)\"");
  int closed = 0;
  rv_server_close(srv, on_srv_closed, &closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(closed, 1);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* -- issue 30: a finished run is never lost, a partition is a lost node ---------------------- */

/* Three members a, b, c of run "job" (3:3, budget `max_restarts`) and a standby d when `standby`,
 * each member with a watch that stands for it (RDZV_WAIT_LOST_ON_CLOSE). */
static void env_three(struct env *e, struct rec *r, struct rec *w, long max_restarts, int standby,
                      struct rdzv_join_req *q_out)
{
  struct rdzv_join_req q;
  env_init(e, 0);
  cfg(&q, 3, 3, -1);
  q.config.max_restarts = max_restarts;
  q.config.lease_ttl_ms = 300; /* only a node with no join pending and no watch open has one */
  if (q_out != NULL)
    *q_out = q;
  static const char *const ids[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 3 + standby; i++)
    join(e, "job", &q, ids[i], &r[i]);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(r[i].fired, 1);
    rec_init(&w[i]);
    w[i].w.flags = RDZV_WAIT_LOST_ON_CLOSE;
    ASSERT_EQ(rdzv_watch(e->rv, "job", ids[i], 1, 60000, &w[i].w), 0);
  }
}

TEST(rdzv__a_member_lost_after_the_others_succeeded_ends_the_run_succeeded)
{
  /* The one-way partition: a and b leave with success, c's watch's connection closes (it never
   * heard the answer): the run ends succeeded at once, naming c; c's success leave that comes
   * after its loss is answered as for an ended run. */
  struct env e;
  struct rec r[3], w[3];
  env_three(&e, r, w, 3, 0, NULL);
  ASSERT_EQ(rdzv_leave(e.rv, "job", "a", 0, NULL), 0);
  ASSERT_EQ(rdzv_leave(e.rv, "job", "b", 0, NULL), 0);
  rdzv_wait_gone(&w[2].w);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.state, RDZV_RUN_CLOSED);
  ASSERT(strstr(info.reason, "'c' lost") != NULL);
  ASSERT_EQ(rdzv_leave(e.rv, "job", "c", 0, NULL), 0);
  env_done(&e);
}

TEST(rdzv__a_lost_members_late_success_counts)
{
  /* c is lost first (the round breaks); a and b had finished and leave with success in the
   * broken round, then c's own success comes: the run ends succeeded with every member's. */
  struct env e;
  struct rec r[3], w[3];
  env_three(&e, r, w, 3, 0, NULL);
  rdzv_wait_gone(&w[2].w);
  ASSERT_STR_EQ(w[0].event, "broken");
  ASSERT_EQ(rdzv_leave(e.rv, "job", "c", 0, NULL), 0); /* late: it was lost */
  ASSERT_EQ(rdzv_leave(e.rv, "job", "a", 0, NULL), 0);
  struct rdzv_run_info info;
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.state, RDZV_RUN_OPEN); /* b still runs toward its success */
  ASSERT_EQ(rdzv_leave(e.rv, "job", "b", 0, NULL), 0);
  rdzv_run_info(rdzv_find(e.rv, "job"), &info);
  ASSERT_EQ(info.state, RDZV_RUN_CLOSED);
  ASSERT_STR_EQ(info.reason, "every member left with success");
  env_done(&e);
}

TEST(rdzv__a_run_that_cannot_reach_its_minimum_ends_at_once)
{
  /* a finished with success, then b's workers fail: a never joins again, so b and c alone can
   * never make 3: the run is shut now (not at the join timeout), naming a. */
  struct env e;
  struct rec r[3], w[3];
  struct rdzv_report_answer a;
  env_three(&e, r, w, 3, 0, NULL);
  ASSERT_EQ(rdzv_leave(e.rv, "job", "a", 0, NULL), 0);
  ASSERT_EQ(report(&e, "b", 1, RDZV_REPORT_FAILED, &a), 0);
  ASSERT_STR_EQ(a.state, "shut");
  ASSERT(strstr(a.reason, "can no longer reach its minimum of 3 nodes (2 left)") != NULL);
  ASSERT(strstr(a.reason, "'a' finished") != NULL);
  env_done(&e);
}

TEST(rdzv__a_hang_that_a_lost_peer_caused_counts_nothing)
{
  /* a reports a hang (its peer c went silent); c is found lost before the next round closes
   * (its watch was answered to a dead connection: its lease runs out): the restart is given
   * back, and with no restart left the shut is called off; the standby d takes c's place. */
  for (int budget = 0; budget <= 1; budget++) {
    struct env e;
    struct rec r[4], w[3];
    struct rdzv_report_answer a;
    struct rdzv_join_req q;
    env_three(&e, r, w, budget, 1, &q);
    ASSERT_EQ(report(&e, "a", 1, RDZV_REPORT_HUNG, &a), 0);
    ASSERT_EQ(a.counted, 1);
    ASSERT_STR_EQ(a.state, "open");
    struct rdzv_run_info info;
    rdzv_run_info(rdzv_find(e.rv, "job"), &info);
    ASSERT_EQ(info.restarts, (uint32_t)budget); /* counted, or the shut waits */
    join(&e, "job", &q, "a", &r[0]);
    join(&e, "job", &q, "b", &r[1]);
    /* with a restart left the round closes at once with d in c's place (c counts as slow);
     * with none, the shut waits for c: its re-join would confirm it, its loss calls it off */
    spin(&e.loop, 50); /* (the last call of 0 ms runs on the loop) */
    if (leases_expired(&e) == 0)
      ASSERT_EQ(r[0].fired, budget);
    for (int i = 0; i < 300 && leases_expired(&e) == 0; i++)
      spin(&e.loop, 10);             /* c's lease runs out */
    ASSERT(leases_expired(&e) >= 1); /* c's (round 2's members' may follow: no watch here) */
    ASSERT_EQ(r[0].fired, 1);
    ASSERT_EQ(r[0].err, 0);
    ASSERT_EQ(r[3].fired, 1);
    ASSERT_EQ(r[3].round, 2);
    rdzv_run_info(rdzv_find(e.rv, "job"), &info);
    ASSERT_EQ(info.state, RDZV_RUN_OPEN);
    ASSERT_EQ(info.restarts, 0);
    char *j = goodput_json(&e);
    ASSERT(strstr(j, "\"end\":\"hung\",\"counted\":false") != NULL);
    mu_free(j);
    env_done(&e);
  }
}
