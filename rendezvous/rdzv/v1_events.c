/* Run events over /v1: every event of the state machine (a run created, a join, a round closed,
 * a member lost, a round broken and why, a run ended) becomes one info log line and one entry
 * of a ring of the last RING events (joins log at debug level), which `GET
 * /v1/events?after=SEQ&timeout_ms=T` returns: at once when newer events exist, else as a long poll
 * that the next event (or the timeout) answers. musterd's status page follows the server with it,
 * so it never polls on a clock.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "json.h"
#include "list.h"
#include "log.h"
#include "v1.h"
#include "v1_int.h"

#define RING 256
#define DEFAULT_WAIT_MS 25000

struct event {
  uint64_t seq;
  int64_t time_ms; /* wall clock */
  char run_id[129];
  char kind[16];
  char text[512];
};

struct waiter {
  struct mu_list_node link;
  struct events *ev;
  struct rv_req *req;
  uint64_t after;
  uint64_t deadline; /* uv_now() ms */
};

struct events {
  struct rv_server *srv;
  struct event ring[RING];
  uint64_t seq; /* the last event's */
  struct mu_list waiters;
  uv_timer_t timer;
  int closed;
  v1_run_event_fn *listener; /* v1_events_listen() */
  void *listener_data;
};

static int64_t wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* May the request's credential see event `e` (of a run its scopes cover)? */
static int visible(const struct rv_req *req, const struct event *e)
{
  return rv_cred_allows(req->cred, RV_SCOPE_RUN, e->run_id, strlen(e->run_id), RV_READ);
}

/* Is there an event after `after` that the request's credential may see? */
static int news_for(const struct events *ev, const struct rv_req *req, uint64_t after)
{
  uint64_t first = ev->seq > RING ? ev->seq - RING + 1 : 1;
  for (uint64_t s = after + 1 > first ? after + 1 : first; s <= ev->seq; s++)
    if (visible(req, &ev->ring[s % RING]))
      return 1;
  return 0;
}

/* {"seq": last, "first": oldest kept, "events": [...]} with the events after `after` that the
 * request's credential may see (its runs). */
static void reply_events(struct events *ev, struct rv_req *req, uint64_t after)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  uint64_t first = ev->seq > RING ? ev->seq - RING + 1 : 1;
  mu_buf_printf(&b, "{\"seq\":%" PRIu64 ",\"first\":%" PRIu64 ",\"events\":[", ev->seq, first);
  uint64_t from = after + 1 > first ? after + 1 : first;
  int n = 0;
  for (uint64_t s = from; s <= ev->seq; s++) {
    const struct event *e = &ev->ring[s % RING];
    if (!visible(req, e))
      continue;
    mu_buf_printf(&b,
                  "%s{\"seq\":%" PRIu64 ",\"time_ms\":%" PRId64 ",\"run_id\":", n++ == 0 ? "" : ",",
                  e->seq, e->time_ms);
    mu_json_str(&b, e->run_id, strlen(e->run_id));
    mu_buf_puts(&b, ",\"kind\":");
    mu_json_str(&b, e->kind, strlen(e->kind));
    mu_buf_puts(&b, ",\"text\":");
    mu_json_str(&b, e->text, strlen(e->text));
    mu_buf_puts(&b, "}");
  }
  mu_buf_puts(&b, "]}");
  v1_reply_buf(req, 200, &b);
}

static void waiter_free(struct waiter *w)
{
  mu_list_remove(&w->ev->waiters, &w->link);
  mu_free(w);
}

static void on_timer(uv_timer_t *t);

static void rearm(struct events *ev)
{
  uint64_t next = UINT64_MAX;
  for (struct mu_list_node *x = ev->waiters.head; x != NULL; x = x->next) {
    struct waiter *w = MU_CONTAINER_OF(x, struct waiter, link);
    if (w->deadline < next)
      next = w->deadline;
  }
  uv_timer_stop(&ev->timer);
  if (next == UINT64_MAX || ev->closed)
    return;
  uint64_t now = uv_now(rv_server_loop(ev->srv));
  uv_timer_start(&ev->timer, on_timer, next > now ? next - now : 0, 0);
}

/* Answers every waiter whose wait is over (an event newer than its `after`, or its deadline). */
static void answer(struct events *ev, int timed_out_only)
{
  uint64_t now = uv_now(rv_server_loop(ev->srv));
  struct mu_list_node *x = ev->waiters.head;
  while (x != NULL) {
    struct waiter *w = MU_CONTAINER_OF(x, struct waiter, link);
    x = x->next;
    if ((!timed_out_only && ev->seq > w->after && news_for(ev, w->req, w->after)) ||
        w->deadline <= now) {
      struct rv_req *req = w->req;
      uint64_t after = w->after;
      waiter_free(w);
      reply_events(ev, req, after);
    }
  }
  rearm(ev);
}

static void on_timer(uv_timer_t *t)
{
  answer(t->data, 1);
}

static void on_gone(struct rv_req *req, void *data)
{
  (void)req;
  struct waiter *w = data;
  struct events *ev = w->ev;
  waiter_free(w);
  rearm(ev);
}

static void on_event(void *data, const char *run_id, const char *kind, const char *text)
{
  struct events *ev = data;
  /* Joins come by the thousand in a big run: debug; every other event is one info line. */
  mu_log(strcmp(kind, "join") == 0 ? MU_LOG_DEBUG : MU_LOG_INFO, "run '%s': %s", run_id, text);
  struct event *e = &ev->ring[++ev->seq % RING];
  e->seq = ev->seq;
  e->time_ms = wall_ms();
  snprintf(e->run_id, sizeof(e->run_id), "%s", run_id);
  snprintf(e->kind, sizeof(e->kind), "%s", kind);
  snprintf(e->text, sizeof(e->text), "%s", text);
  answer(ev, 0);
  if (ev->listener != NULL && strcmp(kind, "join") != 0)
    ev->listener(ev->listener_data, run_id);
}

void v1_events_listen(struct rv_server *srv, v1_run_event_fn *fn, void *data)
{
  struct events *ev = rv_server_module_data(srv, "rdzv_events");
  if (ev == NULL)
    return;
  ev->listener = fn;
  ev->listener_data = data;
}

static void events_handler(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  struct events *ev = rv_server_module_data(req->srv, "rdzv_events");
  long after = 0, timeout = 0;
  if (v1_param_int_or_reply(req, "after", 0, 0, INT64_MAX, 0, &after) != 0 ||
      v1_param_int_or_reply(req, "timeout_ms", 0, 0, V1_MAX_REQ_TIMEOUT_MS, DEFAULT_WAIT_MS,
                            &timeout) != 0)
    return;
  if (ev == NULL) {
    v1_reply_json(req, "{\"seq\":0,\"first\":1,\"events\":[]}");
    return;
  }
  /* Newer events it may see, no wait asked, or an `after` from before a restart: answer at
   * once. */
  if ((uint64_t)after > ev->seq || timeout == 0 || ev->closed ||
      news_for(ev, req, (uint64_t)after)) {
    reply_events(ev, req, (uint64_t)after > ev->seq ? 0 : (uint64_t)after);
    return;
  }
  struct waiter *w = mu_calloc(1, sizeof(*w));
  w->ev = ev;
  w->req = req;
  w->after = (uint64_t)after;
  w->deadline = uv_now(rv_server_loop(req->srv)) + (uint64_t)timeout;
  mu_list_push_back(&ev->waiters, &w->link);
  rv_req_defer(req, on_gone, w);
  rearm(ev);
}

static const struct rv_route events_routes[] = {
    {RV_GET, "/v1/events", RV_ROUTE_LONG_POLL, events_handler, "v1", NULL},
    {0, NULL, 0, NULL, NULL, NULL},
};

static void on_timer_closed(uv_handle_t *h)
{
  struct events *ev = h->data;
  struct rv_server *srv = ev->srv;
  mu_free(ev);
  rv_server_unref(srv);
}

static void events_close(struct rv_server *srv, void *data)
{
  struct events *ev = data;
  /* Deferred requests had on_gone already: no waiter is left. */
  ev->closed = 1;
  rv_server_ref(srv);
  uv_timer_stop(&ev->timer);
  uv_close((uv_handle_t *)&ev->timer, on_timer_closed);
}

void v1_events_register(struct rv_server *srv, struct rdzv *rv)
{
  struct events *ev = mu_calloc(1, sizeof(*ev));
  ev->srv = srv;
  mu_list_init(&ev->waiters);
  uv_timer_init(rv_server_loop(srv), &ev->timer);
  ev->timer.data = ev;
  struct rv_module mod = {"rdzv_events", ev, events_close, NULL};
  rv_server_add_module(srv, &mod);
  rv_server_add_routes(srv, events_routes);
  rdzv_set_event_hook(rv, on_event, ev);
}
