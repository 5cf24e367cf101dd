/* The log writer: appending records from the store's commit hook and the rendezvous' change
 * hook, the group-commit thread of batch mode, the server's durability barrier (no output
 * reveals a record before it is durable), and the module's stop, close and free (see persist.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "http.h"
#include "log.h"
#include "persist_int.h"
#include "rdzv.h"
#include "store.h"
#include "v2.h"

int persist_fsync_parse(const char *name, enum persist_fsync *out)
{
  if (strcmp(name, "batch") == 0)
    *out = PERSIST_FSYNC_BATCH;
  else if (strcmp(name, "always") == 0)
    *out = PERSIST_FSYNC_ALWAYS;
  else if (strcmp(name, "off") == 0)
    *out = PERSIST_FSYNC_OFF;
  else
    return MU_EINVAL;
  return 0;
}

const char *persist_fsync_name(enum persist_fsync m)
{
  return m == PERSIST_FSYNC_ALWAYS ? "always" : m == PERSIST_FSYNC_OFF ? "off" : "batch";
}

/* A failed write or sync: the log can no longer promise anything. As etcd does, stop. */
static void fatal_io(struct persist *p, const char *what, int err)
{
  mu_log(MU_LOG_ERROR,
         "data dir '%s': %s failed: %s; stopping so that no write is acknowledged without being "
         "durable (fix the disk, then restart: the log is consistent up to the last sync)",
         p->dir, what, strerror(-err));
  exit(1);
}

/* ---------------------------------------------------------------------------------------------
 * The barrier: no output reveals a record before it is durable
 */

/* The newest record a reply made now may reveal (every record appended so far: store writes
 * and rendezvous changes alike are appended as they happen), or 0 when all of them are
 * durable. */
static uint64_t barrier_need(void *data)
{
  struct persist *p = data;
  uint64_t need = p->appended;
  return p->stopped || need <= p->synced ? 0 : need;
}

void persist_notify_durable(struct persist *p)
{
  if (p->srv != NULL)
    rv_server_durable(p->srv, p->stopped ? UINT64_MAX : p->synced);
}

/* ---------------------------------------------------------------------------------------------
 * The sync thread (batch mode)
 */

static void sync_thread(void *arg)
{
  struct persist *p = arg;
  uv_mutex_lock(&p->mu);
  for (;;) {
    while (!p->busy && !p->quit)
      uv_cond_wait(&p->cond, &p->mu);
    if (!p->busy && p->quit)
      break;
    int fd = p->fd;
    uv_mutex_unlock(&p->mu);
    int rc = persist_write(fd, p->inflight.data, p->inflight.len);
    if (rc == 0 && fdatasync(fd) != 0)
      rc = -errno;
    uv_mutex_lock(&p->mu);
    p->thread_err = rc;
    p->thread_done = p->inflight_last;
    p->busy = 0;
    uv_cond_broadcast(&p->cond);
    uv_async_send(&p->async);
  }
  uv_mutex_unlock(&p->mu);
}

/* Hands the pending records to the thread. Loop thread, with the thread idle. */
static void start_batch(struct persist *p)
{
  uv_mutex_lock(&p->mu);
  struct mu_buf t = p->inflight;
  p->inflight = p->pending;
  p->pending = t;
  mu_buf_clear(&p->pending);
  p->inflight_last = p->appended;
  if (p->inflight.len > p->m_max_batch)
    p->m_max_batch = p->inflight.len;
  p->m_bytes += p->inflight.len;
  p->m_syncs++;
  p->busy = 1;
  uv_cond_broadcast(&p->cond);
  uv_mutex_unlock(&p->mu);
}

int persist_wait_idle(struct persist *p)
{
  if (!p->thread_started)
    return 0;
  uv_mutex_lock(&p->mu);
  while (p->busy)
    uv_cond_wait(&p->cond, &p->mu);
  int rc = p->thread_err;
  p->thread_err = 0;
  if (p->thread_done > p->synced)
    p->synced = p->thread_done;
  uv_mutex_unlock(&p->mu);
  return rc;
}

static int thread_busy(struct persist *p)
{
  uv_mutex_lock(&p->mu);
  int b = p->busy;
  uv_mutex_unlock(&p->mu);
  return b;
}

int persist_flush_sync(struct persist *p)
{
  int rc = persist_wait_idle(p);
  if (rc == 0 && p->pending.len > 0) {
    rc = persist_write(p->fd, p->pending.data, p->pending.len);
    if (rc == 0)
      p->m_bytes += p->pending.len;
  }
  if (rc == 0 && fdatasync(p->fd) != 0)
    rc = -errno;
  if (rc == 0) {
    p->m_syncs++;
    mu_buf_clear(&p->pending);
    p->synced = p->appended;
  }
  return rc;
}

static void maybe_work(struct persist *p)
{
  if (p->stopped || p->failed)
    return;
  if (p->since_snap >= p->snapshot_every && p->snapshot_every > 0 && !thread_busy(p)) {
    int rc = persist_snapshot(p);
    if (rc != 0)
      fatal_io(p, "writing a snapshot", rc);
    return;
  }
  if (p->mode == PERSIST_FSYNC_BATCH && p->pending.len > 0 && !thread_busy(p))
    start_batch(p);
}

static void on_async(uv_async_t *a)
{
  struct persist *p = a->data;
  uv_mutex_lock(&p->mu);
  int err = p->thread_err;
  p->thread_err = 0;
  if (p->thread_done > p->synced)
    p->synced = p->thread_done;
  uv_mutex_unlock(&p->mu);
  if (err != 0) {
    p->failed = 1;
    fatal_io(p, "writing the log", err);
  }
  maybe_work(p);
  persist_notify_durable(p);
}

/* Runs once after the callbacks of this loop iteration appended their records (an active idle
 * handle also keeps the next poll from blocking, so records appended from a timer are not left
 * waiting for the next I/O event). */
static void on_kick(uv_idle_t *h)
{
  uv_idle_stop(h);
  maybe_work(h->data);
  persist_notify_durable(h->data); /* always, off: the records just written */
}

static void kick(struct persist *p)
{
  if (p->handles_open == 2 && !p->handles_closing && !uv_is_active((uv_handle_t *)&p->kick))
    uv_idle_start(&p->kick, on_kick);
}

/* ---------------------------------------------------------------------------------------------
 * Appending
 */

/* A record was just appended to `pending` from offset `before`: count it, and write (and sync)
 * it now unless the batch thread will. */
static void appended(struct persist *p, size_t before)
{
  p->appended++;
  p->since_snap++;
  if (p->mode == PERSIST_FSYNC_BATCH ||
      (p->snapshot_every > 0 && p->since_snap >= p->snapshot_every))
    kick(p);
  if (p->mode == PERSIST_FSYNC_BATCH)
    return;
  int rc = persist_write(p->fd, p->pending.data + before, p->pending.len - before);
  if (rc == 0 && p->mode == PERSIST_FSYNC_ALWAYS && fdatasync(p->fd) != 0)
    rc = -errno;
  if (rc != 0)
    fatal_io(p, "writing the log", rc);
  p->m_bytes += p->pending.len - before;
  if (p->mode == PERSIST_FSYNC_ALWAYS)
    p->m_syncs++;
  mu_buf_clear(&p->pending);
  p->synced = p->appended;
}

void persist_on_commit(void *data, const struct v2_event *e)
{
  struct persist *p = data;
  if (p->stopped)
    return;
  size_t before = p->pending.len;
  if (persist_encode_event(&p->pending, p->s, e) != 0)
    fatal_io(p, "encoding a log record (over 256 MiB)", -E2BIG);
  appended(p, before);
}

/* One change of the rendezvous state, logged as that change (a KV key set, a round closed, a
 * member gone), not as the whole state: the log grows by what changed. */
void persist_on_rdzv_change(void *data, const struct rdzv_change *c)
{
  struct persist *p = data;
  if (p->stopped)
    return;
  size_t before = p->pending.len;
  if (persist_encode_rdzv_change(p, c, &p->pending) != 0)
    fatal_io(p, "encoding a rendezvous change (over 256 MiB)", -E2BIG);
  appended(p, before);
}

int persist_start(struct persist *p, struct mu_buf *err)
{
  if (p->mode == PERSIST_FSYNC_BATCH) {
    if (uv_thread_create(&p->thread, sync_thread, p) != 0) {
      mu_buf_puts(err, "cannot start the log sync thread");
      return -1;
    }
    p->thread_started = 1;
  }
  uv_async_init(p->loop, &p->async, on_async);
  p->async.data = p;
  uv_idle_init(p->loop, &p->kick);
  p->kick.data = p;
  uv_unref((uv_handle_t *)&p->kick);
  uv_unref((uv_handle_t *)&p->async);
  p->handles_open = 2;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Module, stop, free
 */

static void handle_closed(uv_handle_t *h)
{
  struct persist *p = h->data;
  p->handles_open--;
  if (p->srv != NULL)
    rv_server_unref(p->srv);
}

static void stop_thread(struct persist *p)
{
  if (!p->thread_started)
    return;
  uv_mutex_lock(&p->mu);
  p->quit = 1;
  uv_cond_broadcast(&p->cond);
  uv_mutex_unlock(&p->mu);
  uv_thread_join(&p->thread);
  p->thread_started = 0;
}

/* Stops logging without touching the store (it may be gone): syncs what is pending. */
static void stop_logging(struct persist *p)
{
  if (p->stopped)
    return;
  int rc = 0;
  if (p->fd >= 0) {
    rc = persist_flush_sync(p);
    if (rc != 0)
      mu_log(MU_LOG_ERROR, "data dir '%s': final log sync failed: %s", p->dir, strerror(-rc));
  }
  stop_thread(p);
  p->stopped = 1;
  /* everything is durable: the held output goes out. After a failed sync it was not kept,
   * so it is never sent (the server force-closes those connections) */
  if (p->srv != NULL && rc == 0)
    rv_server_set_barrier(p->srv, NULL);
}

int persist_stop(struct persist *p)
{
  if (p == NULL || p->stopped)
    return 0;
  int rc = 0;
  if (p->since_snap > 0 && !p->failed)
    rc = persist_snapshot(p);
  if (rc == 0)
    rc = persist_flush_sync(p);
  if (rc == 0)
    persist_notify_durable(p);
  stop_thread(p);
  p->stopped = 1;
  p->s->on_commit = NULL;
  p->s->on_commit_data = NULL;
  if (p->rdzv != NULL)
    rdzv_set_change_hook(p->rdzv, NULL, NULL);
  return rc;
}

void persist_close(struct persist *p)
{
  if (p == NULL)
    return;
  stop_logging(p);
  if (p->handles_open == 2 && !p->handles_closing) {
    p->handles_closing = 1;
    if (p->srv != NULL) {
      rv_server_ref(p->srv);
      rv_server_ref(p->srv);
    }
    uv_close((uv_handle_t *)&p->kick, handle_closed);
    uv_close((uv_handle_t *)&p->async, handle_closed);
  }
}

static void module_close(struct rv_server *srv, void *data)
{
  (void)srv;
  persist_close(data); /* synced and stopped: the held output goes out */
}

static void module_metrics(struct rv_server *srv, void *data, struct mu_buf *out)
{
  struct persist *p = data;
  (void)srv;
  mu_buf_printf(out,
                "# TYPE musterd_wal_records_total counter\nmusterd_wal_records_total %llu\n"
                "# TYPE musterd_wal_fsyncs_total counter\nmusterd_wal_fsyncs_total %llu\n"
                "# TYPE musterd_wal_bytes_total counter\nmusterd_wal_bytes_total %llu\n"
                "# TYPE musterd_wal_max_batch_bytes gauge\nmusterd_wal_max_batch_bytes %llu\n"
                "# TYPE musterd_snapshots_total counter\nmusterd_snapshots_total %llu\n",
                (unsigned long long)p->appended, (unsigned long long)p->m_syncs,
                (unsigned long long)p->m_bytes, (unsigned long long)p->m_max_batch,
                (unsigned long long)p->m_snapshots);
}

void persist_attach(struct persist *p, struct rv_server *srv)
{
  p->srv = srv;
  struct rv_module m = {"persist", p, module_close, module_metrics};
  rv_server_add_module(srv, &m);
  struct rv_barrier b = {barrier_need, p};
  rv_server_set_barrier(srv, &b);
}

void persist_free(struct persist *p)
{
  if (p == NULL)
    return;
  stop_thread(p);
  if (p->fd >= 0)
    close(p->fd);
  if (p->lock_fd >= 0)
    close(p->lock_fd);
  mu_buf_release(&p->pending);
  mu_buf_release(&p->inflight);
  mu_free(p->rdzv_blob);
  uv_mutex_destroy(&p->mu);
  uv_cond_destroy(&p->cond);
  mu_free(p->dir);
  mu_free(p);
}
