/* Durability for the etcd v2 store: see persist.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "muster/errno.h"

#include "fsutil.h"
#include "alloc.h"
#include "http.h"
#include "log.h"
#include "persist.h"
#include "rdzv.h"
#include "store.h"
#include "wal.h"

#define BUF_MAX ((size_t)1 << 40)
#define SNAP_CHUNK ((size_t)4 << 20)

/* A reply waiting for the sync of the batch that holds its record. */
struct held {
  struct held *next, *prev;
  struct mu_persist *p;
  struct rv_req *req;
  uint64_t need; /* records that must be synced */
  int status;
  char *ctype, *hdrs, *body;
  size_t len;
};

struct mu_persist {
  char *dir;
  enum mu_fsync_mode mode;
  uint64_t snapshot_every;
  struct mu_store *s;
  struct mu_rdzv *rdzv; /* NULL: /v1 not served */
  int rdzv_dirty;       /* its state changed since the last MU_REC_RDZV record */
  char *rdzv_blob;      /* recovery: the newest state found */
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

  struct held *held_head, *held_tail;

  /* /metrics */
  uint64_t m_syncs, m_bytes, m_snapshots, m_max_batch, m_held;
};

/* ---------------------------------------------------------------------------------------------
 * Small file helpers
 */

static int write_all(int fd, const void *p, size_t n)
{
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int sync_dir(const char *dir)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return -errno;
  int rc = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return rc;
}

static char *snap_path(const char *dir, uint64_t index)
{
  return mu_asprintf("%s/snap-%020llu.snap", dir, (unsigned long long)index);
}

static char *wal_path(const char *dir, uint64_t first)
{
  return mu_asprintf("%s/wal-%020llu.log", dir, (unsigned long long)first);
}

/* Parses "<prefix><20 digits><suffix>". Returns: 1 with *index, else 0. */
static int parse_name(const char *name, const char *prefix, const char *suffix, uint64_t *index)
{
  size_t pl = strlen(prefix), sl = strlen(suffix);
  if (strlen(name) != pl + 20 + sl || strncmp(name, prefix, pl) != 0 ||
      strcmp(name + pl + 20, suffix) != 0)
    return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < 20; i++) {
    char c = name[pl + i];
    if (c < '0' || c > '9')
      return 0;
    v = v * 10 + (uint64_t)(c - '0');
  }
  *index = v;
  return 1;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

struct listing {
  uint64_t *snaps, *wals;
  size_t nsnaps, nwals;
};

static void listing_release(struct listing *l)
{
  mu_free(l->snaps);
  mu_free(l->wals);
  memset(l, 0, sizeof(*l));
}

static int list_dir(const char *dir, struct listing *l)
{
  memset(l, 0, sizeof(*l));
  DIR *d = opendir(dir);
  if (d == NULL)
    return -errno;
  size_t cs = 0, cw = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    uint64_t v;
    if (parse_name(de->d_name, "snap-", ".snap", &v)) {
      if (l->nsnaps == cs) {
        cs = cs ? cs * 2 : 8;
        l->snaps = mu_realloc(l->snaps, cs * sizeof(*l->snaps));
      }
      l->snaps[l->nsnaps++] = v;
    } else if (parse_name(de->d_name, "wal-", ".log", &v)) {
      if (l->nwals == cw) {
        cw = cw ? cw * 2 : 8;
        l->wals = mu_realloc(l->wals, cw * sizeof(*l->wals));
      }
      l->wals[l->nwals++] = v;
    }
  }
  closedir(d);
  if (l->nsnaps > 1)
    qsort(l->snaps, l->nsnaps, sizeof(*l->snaps), cmp_u64);
  if (l->nwals > 1)
    qsort(l->wals, l->nwals, sizeof(*l->wals), cmp_u64);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Records from store events
 */

/* Fills `r` (from scratch) as a record of `type` (MU_REC_EVENT or MU_REC_SNAP_EVENT) for `e`:
 * its action, index, key, JSON and refresh/created/dir flags. */
static void event_rec(struct mu_wal_rec *r, int type, const struct mu_event *e)
{
  memset(r, 0, sizeof(*r));
  r->type = (uint8_t)type;
  r->action = (uint8_t)e->action;
  r->index = e->index;
  r->key = e->key;
  r->key_len = (uint32_t)e->key_len;
  r->json = e->json;
  r->json_len = (uint32_t)e->json_len;
  r->aux = e->json_head;
  r->flags = (uint8_t)((e->refresh ? MU_REC_REFRESH : 0) | (e->created ? MU_REC_CREATED : 0) |
                       (e->node_dir ? MU_REC_DIR : 0));
}

static int encode_event(struct mu_buf *out, struct mu_store *s, const struct mu_event *e)
{
  struct mu_wal_rec r;
  event_rec(&r, MU_REC_EVENT, e);
  if (e->action != MU_EV_DELETE && e->action != MU_EV_CAD && e->action != MU_EV_EXPIRE) {
    const struct mu_node *n = mu_store_lookup(s, e->key);
    if (n != NULL) {
      r.expire_ns = n->expire_ns;
      if (n->is_dir) {
        r.flags |= MU_REC_DIR;
      } else {
        r.flags |= MU_REC_HAS_VALUE;
        r.value = n->value;
        r.value_len = n->value_len;
      }
    }
  }
  return mu_wal_rec_put(out, &r);
}

/* ---------------------------------------------------------------------------------------------
 * Held replies
 */

static void held_unlink(struct mu_persist *p, struct held *h)
{
  if (h->prev != NULL)
    h->prev->next = h->next;
  else
    p->held_head = h->next;
  if (h->next != NULL)
    h->next->prev = h->prev;
  else
    p->held_tail = h->prev;
  h->next = h->prev = NULL;
}

static void held_free(struct held *h)
{
  mu_free(h->ctype);
  mu_free(h->hdrs);
  mu_free(h->body);
  mu_free(h);
}

static void held_gone(struct rv_req *req, void *data)
{
  struct held *h = data;
  (void)req;
  held_unlink(h->p, h);
  held_free(h);
}

/* Answers every held reply whose records are durable. */
static void release_held(struct mu_persist *p)
{
  while (p->held_head != NULL && p->held_head->need <= p->synced) {
    struct held *h = p->held_head;
    held_unlink(p, h);
    rv_reply(h->req, h->status, h->ctype, h->hdrs, h->body, h->len);
    held_free(h);
  }
}

/* A failed write or sync: the log can no longer promise anything. As etcd does, stop. */
static void fatal_io(struct mu_persist *p, const char *what, int err)
{
  mu_log(MU_LOG_ERROR,
         "data dir '%s': %s failed: %s; stopping so that no write is acknowledged without being "
         "durable (fix the disk, then restart: the log is consistent up to the last sync)",
         p->dir, what, strerror(-err));
  exit(1);
}

void mu_persist_reply(struct rv_req *req, int status, const char *content_type,
                      const char *extra_headers, const void *body, size_t len)
{
  struct mu_persist *p = rv_server_module_data(req->srv, "persist");
  if (p == NULL || p->stopped || p->synced >= p->appended) {
    rv_reply(req, status, content_type, extra_headers, body, len);
    return;
  }
  struct held *h = mu_calloc(1, sizeof(*h));
  h->p = p;
  h->req = req;
  h->need = p->appended;
  h->status = status;
  h->ctype = content_type ? mu_strdup(content_type) : NULL;
  h->hdrs = extra_headers ? mu_strdup(extra_headers) : NULL;
  h->body = mu_malloc(len + 1);
  if (len > 0)
    memcpy(h->body, body, len);
  h->len = len;
  h->prev = p->held_tail;
  if (p->held_tail != NULL)
    p->held_tail->next = h;
  else
    p->held_head = h;
  p->held_tail = h;
  p->m_held++;
  rv_req_defer(req, held_gone, h);
}

/* ---------------------------------------------------------------------------------------------
 * The sync thread (batch mode)
 */

static void sync_thread(void *arg)
{
  struct mu_persist *p = arg;
  uv_mutex_lock(&p->mu);
  for (;;) {
    while (!p->busy && !p->quit)
      uv_cond_wait(&p->cond, &p->mu);
    if (!p->busy && p->quit)
      break;
    int fd = p->fd;
    uv_mutex_unlock(&p->mu);
    int rc = write_all(fd, p->inflight.data, p->inflight.len);
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
static void start_batch(struct mu_persist *p)
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

/* Waits for the thread to finish its batch (shutdown, snapshots). Returns: its error. */
static int wait_idle(struct mu_persist *p)
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

static int thread_busy(struct mu_persist *p)
{
  uv_mutex_lock(&p->mu);
  int b = p->busy;
  uv_mutex_unlock(&p->mu);
  return b;
}

/* Writes and syncs the pending records on the loop thread. */
static int flush_sync(struct mu_persist *p)
{
  int rc = wait_idle(p);
  if (rc == 0 && p->pending.len > 0) {
    rc = write_all(p->fd, p->pending.data, p->pending.len);
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

static void log_rdzv(struct mu_persist *p);

static void maybe_work(struct mu_persist *p)
{
  if (p->stopped || p->failed)
    return;
  if (p->rdzv_dirty)
    log_rdzv(p);
  if (p->since_snap >= p->snapshot_every && p->snapshot_every > 0 && !thread_busy(p)) {
    int rc = mu_persist_snapshot(p);
    if (rc != 0)
      fatal_io(p, "writing a snapshot", rc);
    return;
  }
  if (p->mode == MU_FSYNC_BATCH && p->pending.len > 0 && !thread_busy(p))
    start_batch(p);
}

static void on_async(uv_async_t *a)
{
  struct mu_persist *p = a->data;
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
  release_held(p);
  maybe_work(p);
}

/* Runs once after the callbacks of this loop iteration appended their records (an active idle
 * handle also keeps the next poll from blocking, so records appended from a timer are not left
 * waiting for the next I/O event). */
static void on_kick(uv_idle_t *h)
{
  uv_idle_stop(h);
  maybe_work(h->data);
}

static void kick(struct mu_persist *p)
{
  if (p->handles_open == 2 && !p->handles_closing && !uv_is_active((uv_handle_t *)&p->kick))
    uv_idle_start(&p->kick, on_kick);
}

/* A record was just appended to `pending` from offset `before`: count it, and write (and sync)
 * it now unless the batch thread will. */
static void appended(struct mu_persist *p, size_t before)
{
  p->appended++;
  p->since_snap++;
  if (p->mode == MU_FSYNC_BATCH || (p->snapshot_every > 0 && p->since_snap >= p->snapshot_every))
    kick(p);
  if (p->mode == MU_FSYNC_BATCH)
    return;
  int rc = write_all(p->fd, p->pending.data + before, p->pending.len - before);
  if (rc == 0 && p->mode == MU_FSYNC_ALWAYS && fdatasync(p->fd) != 0)
    rc = -errno;
  if (rc != 0)
    fatal_io(p, "writing the log", rc);
  p->m_bytes += p->pending.len - before;
  if (p->mode == MU_FSYNC_ALWAYS)
    p->m_syncs++;
  mu_buf_clear(&p->pending);
  p->synced = p->appended;
}

/* The store's commit hook: one record per write. */
static void on_commit(void *data, const struct mu_event *e)
{
  struct mu_persist *p = data;
  if (p->stopped)
    return;
  size_t before = p->pending.len;
  if (encode_event(&p->pending, p->s, e) != 0)
    fatal_io(p, "encoding a log record (over 256 MiB)", -E2BIG);
  appended(p, before);
}

/* Appends the whole rendezvous state as one record (after the change that dirtied it). */
static int put_rdzv(struct mu_persist *p, struct mu_buf *out)
{
  struct mu_buf blob = MU_BUF_INIT(MU_WAL_MAX_RECORD - 4096);
  int rc = mu_rdzv_encode(p->rdzv, &blob);
  struct mu_wal_rec r;
  memset(&r, 0, sizeof(r));
  r.type = MU_REC_RDZV;
  r.index = p->s->index;
  r.flags = MU_REC_HAS_VALUE;
  r.value = blob.data;
  r.value_len = (uint32_t)blob.len;
  if (rc == 0)
    rc = mu_wal_rec_put(out, &r);
  mu_buf_release(&blob);
  return rc;
}

static void log_rdzv(struct mu_persist *p)
{
  p->rdzv_dirty = 0;
  size_t before = p->pending.len;
  if (put_rdzv(p, &p->pending) != 0)
    fatal_io(p, "encoding the rendezvous state (over 256 MiB)", -E2BIG);
  appended(p, before);
}

/* The rendezvous' change hook: logged once per loop iteration, from the kick. */
static void on_rdzv_change(void *data)
{
  struct mu_persist *p = data;
  if (p->stopped)
    return;
  p->rdzv_dirty = 1;
  kick(p);
}

/* ---------------------------------------------------------------------------------------------
 * Snapshots
 */

struct snap_writer {
  int fd;
  struct mu_buf b;
  int rc;
  uint64_t nodes;
};

static void sw_flush(struct snap_writer *w, int force)
{
  if (w->rc != 0 || (w->b.len < SNAP_CHUNK && !force))
    return;
  w->rc = write_all(w->fd, w->b.data, w->b.len);
  mu_buf_clear(&w->b);
}

static void snap_nodes(struct snap_writer *w, const struct mu_node *n)
{
  for (uint32_t i = 0; i < n->nchildren && w->rc == 0; i++) {
    const struct mu_node *c = n->children[i];
    struct mu_wal_rec r;
    memset(&r, 0, sizeof(r));
    r.type = MU_REC_SNAP_NODE;
    r.index = c->modified_index;
    r.created = c->created_index;
    r.expire_ns = c->expire_ns;
    r.key = c->key;
    r.key_len = c->key_len;
    if (c->is_dir) {
      r.flags = MU_REC_DIR;
    } else {
      r.flags = MU_REC_HAS_VALUE;
      r.value = c->value;
      r.value_len = c->value_len;
    }
    mu_wal_rec_put(&w->b, &r);
    w->nodes++;
    sw_flush(w, 0);
    if (c->is_dir)
      snap_nodes(w, c);
  }
}

static void remove_older(struct mu_persist *p, uint64_t snap_index, uint64_t wal_first)
{
  struct listing l;
  if (list_dir(p->dir, &l) != 0)
    return;
  for (size_t i = 0; i < l.nsnaps; i++) {
    if (l.snaps[i] < snap_index) {
      char *path = snap_path(p->dir, l.snaps[i]);
      unlink(path);
      mu_free(path);
    }
  }
  for (size_t i = 0; i < l.nwals; i++) {
    if (l.wals[i] < wal_first) {
      char *path = wal_path(p->dir, l.wals[i]);
      unlink(path);
      mu_free(path);
    }
  }
  listing_release(&l);
}

int mu_persist_snapshot(struct mu_persist *p)
{
  struct mu_store *s = p->s;
  struct snap_writer w = {-1, MU_BUF_INIT(BUF_MAX), 0, 0};
  char *tmp = mu_asprintf("%s/snap.tmp", p->dir);
  char *final = snap_path(p->dir, s->index);
  char *seg = NULL;
  int nfd = -1;
  int rc = wait_idle(p);
  if (rc != 0)
    goto out;
  w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (w.fd < 0) {
    rc = -errno;
    goto out;
  }
  struct mu_wal_rec r;
  memset(&r, 0, sizeof(r));
  r.type = MU_REC_SNAP_HEAD;
  r.index = s->index;
  r.created = s->nnodes - 1;
  r.aux = s->history.count;
  mu_wal_rec_put(&w.b, &r);
  snap_nodes(&w, s->root);
  const struct mu_event_history *h = &s->history;
  for (unsigned i = 0; i < h->count && w.rc == 0; i++) {
    const struct mu_event *e = h->ring[(h->front + i) % h->cap];
    event_rec(&r, MU_REC_SNAP_EVENT, e);
    mu_wal_rec_put(&w.b, &r);
    sw_flush(&w, 0);
  }
  if (p->rdzv != NULL) {
    p->rdzv_dirty = 0;
    if (put_rdzv(p, &w.b) != 0)
      w.rc = -E2BIG;
  }
  memset(&r, 0, sizeof(r));
  r.type = MU_REC_SNAP_END;
  r.index = s->index;
  r.created = w.nodes;
  r.aux = h->count;
  mu_wal_rec_put(&w.b, &r);
  sw_flush(&w, 1);
  rc = w.rc;
  if (rc == 0 && fsync(w.fd) != 0)
    rc = -errno;
  if (rc != 0)
    goto out;
  close(w.fd);
  w.fd = -1;
  if (rename(tmp, final) != 0) {
    rc = -errno;
    goto out;
  }
  rc = sync_dir(p->dir); /* the snapshot is durable before any log is dropped */
  if (rc != 0)
    goto out;
  /* The snapshot now covers every record appended so far, synced or not. If the current
   * segment already has the new segment's name, no write advanced the index since it
   * started: it holds only rendezvous records, older than the snapshot, so it is emptied too
   * (replayed after the snapshot they would roll the rendezvous state back). */
  seg = wal_path(p->dir, s->index + 1);
  nfd = open(seg, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (nfd < 0) {
    rc = -errno;
    goto out;
  }
  rc = sync_dir(p->dir);
  if (rc != 0)
    goto out;
  uv_mutex_lock(&p->mu);
  int old = p->fd;
  p->fd = nfd;
  p->seg_first = s->index + 1;
  uv_mutex_unlock(&p->mu);
  nfd = -1;
  close(old);
  mu_buf_clear(&p->pending);
  p->synced = p->appended;
  p->since_snap = 0;
  p->m_snapshots++;
  remove_older(p, s->index, s->index + 1);
  release_held(p);
out:
  if (w.fd >= 0)
    close(w.fd);
  if (nfd >= 0)
    close(nfd);
  mu_buf_release(&w.b);
  mu_free(tmp);
  mu_free(final);
  mu_free(seg);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Recovery
 */

/* Keeps a copy of the newest rendezvous state met during recovery (binary: not a string). */
static void keep_rdzv(struct mu_persist *p, const struct mu_wal_rec *r)
{
  mu_free(p->rdzv_blob);
  p->rdzv_blob = mu_malloc((size_t)r->value_len + 1);
  if (r->value_len > 0)
    memcpy(p->rdzv_blob, r->value, r->value_len);
  p->rdzv_len = r->value_len;
}

/* Reads the WAL-format file `path` (`what`: "snapshot" or "log", for the error) whole and points
 * `rd` at its records. Returns: 0 with *data (caller frees with mu_free()) and *size, or MU_EIO
 * with `err` set. */
static int open_records(const char *path, const char *what, unsigned char **data, size_t *size,
                        struct mu_wal_reader *rd, char *err, size_t errlen)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX - 1);
  int rc = mu_read_file(path, SIZE_MAX - 1, &b);
  if (rc != 0) {
    snprintf(err, errlen, "cannot read %s '%s': %s", what, path, mu_strerror(rc));
    mu_buf_release(&b);
    return MU_EIO;
  }
  *size = b.len;
  *data = (unsigned char *)mu_buf_detach(&b);
  mu_wal_reader_init(rd, *data, *size);
  return 0;
}

static int load_snapshot(struct mu_persist *p, const char *path, struct mu_persist_report *rep,
                         char *err, size_t errlen)
{
  struct mu_store *s = p->s;
  unsigned char *data = NULL;
  size_t size = 0;
  struct mu_wal_reader rd;
  int rc = open_records(path, "snapshot", &data, &size, &rd, err, errlen);
  if (rc != 0)
    return rc;
  const unsigned char *pl = NULL;
  size_t len = 0;
  uint64_t nodes = 0, events = 0, index = 0;
  int state = 0; /* 0: want head, 1: body, 2: after end */
  for (;;) {
    size_t at = rd.off;
    int st = mu_wal_read(&rd, &pl, &len);
    if (st == MU_WAL_END)
      break;
    struct mu_wal_rec r;
    const char *why = NULL;
    if (st != MU_WAL_RECORD)
      why = rd.why;
    else if (mu_wal_rec_decode(pl, len, &r) != 0)
      why = "an undecodable record";
    else if (state == 0 && r.type != MU_REC_SNAP_HEAD)
      why = "no snapshot header";
    else if (state == 2)
      why = "data after the snapshot trailer";
    else if (state == 1 && r.type == MU_REC_SNAP_NODE) {
      char *key = mu_strndup(r.key, r.key_len);
      int ok = mu_store_restore_node(s, key, (r.flags & MU_REC_DIR) != 0, r.value, r.value_len,
                                     r.created, r.index, r.expire_ns);
      mu_free(key);
      if (ok != 0)
        why = "a node whose parent is missing or that exists twice";
      nodes++;
    } else if (state == 1 && r.type == MU_REC_SNAP_EVENT) {
      struct mu_event *e = mu_calloc(1, sizeof(*e));
      e->action = (enum mu_event_action)r.action;
      e->index = r.index;
      e->key = mu_strndup(r.key, r.key_len);
      e->key_len = r.key_len;
      e->refresh = (r.flags & MU_REC_REFRESH) != 0;
      e->created = (r.flags & MU_REC_CREATED) != 0;
      e->node_dir = (r.flags & MU_REC_DIR) != 0;
      if (e->node_dir &&
          (e->action == MU_EV_DELETE || e->action == MU_EV_CAD || e->action == MU_EV_EXPIRE))
        e->prev_key = mu_strndup(r.key, r.key_len);
      e->json = mu_strndup(r.json, r.json_len);
      e->json_len = r.json_len;
      e->json_head = r.aux <= r.json_len ? (size_t)r.aux : 0;
      mu_event_history_add(&s->history, e);
      events++;
    } else if (state == 1 && r.type == MU_REC_RDZV) {
      keep_rdzv(p, &r);
    } else if (state == 1 && r.type == MU_REC_SNAP_END) {
      if (r.created != nodes || r.aux != events || r.index != index)
        why = "a trailer whose counts do not match the records";
      state = 2;
    } else if (state == 0) {
      index = r.index;
      state = 1;
    } else {
      why = "an unexpected record type";
    }
    if (why != NULL) {
      snprintf(err, errlen,
               "snapshot '%s' is damaged at byte offset %zu: %s; musterd will not start from "
               "it (restore the data dir from a backup, or move it away to start empty)",
               path, at, why);
      mu_free(data);
      return MU_EPARSE;
    }
  }
  mu_free(data);
  if (state != 2) {
    snprintf(err, errlen,
             "snapshot '%s' is incomplete (no trailer after %zu bytes); musterd will not start "
             "from it (restore the data dir from a backup, or move it away to start empty)",
             path, size);
    return MU_EPARSE;
  }
  s->index = index;
  snprintf(rep->snapshot, sizeof(rep->snapshot), "%s", path);
  rep->snapshot_index = index;
  rep->snapshot_nodes = nodes;
  return 0;
}

/* Replaces the JSON the replayed write rendered now with the one logged at write time. */
static void keep_logged_json(struct mu_store *s, const struct mu_wal_rec *r)
{
  struct mu_event_history *h = &s->history;
  if (h->count == 0 || r->json_len == 0)
    return;
  struct mu_event *e = h->ring[(h->front + h->count - 1) % h->cap];
  if (e->index != r->index)
    return;
  h->bytes -= e->json_len;
  mu_free(e->json);
  e->json = mu_strndup(r->json, r->json_len);
  e->json_len = r->json_len;
  e->json_head = r->aux <= r->json_len ? (size_t)r->aux : 0;
  h->bytes += e->json_len;
}

/* Applies one logged write. Returns: NULL, or why it does not apply (static). */
static const char *apply(struct mu_store *s, const struct mu_wal_rec *r)
{
  if (r->type != MU_REC_EVENT)
    return "a record that is not a store write";
  char *key = mu_strndup(r->key, r->key_len);
  struct mu_v2_err err = {0, NULL, 0};
  struct mu_write w;
  memset(&w, 0, sizeof(w));
  w.key = key;
  w.dir = (r->flags & MU_REC_DIR) != 0 && !(r->flags & MU_REC_HAS_VALUE);
  w.value = (r->flags & MU_REC_HAS_VALUE) ? r->value : NULL;
  w.value_len = (r->flags & MU_REC_HAS_VALUE) ? r->value_len : 0;
  w.expire_ns = r->expire_ns;
  w.refresh = (r->flags & MU_REC_REFRESH) != 0;
  const struct mu_event *e = NULL;
  switch (r->action) {
  case MU_EV_SET:
    e = mu_store_set(s, &w, &err);
    break;
  case MU_EV_CREATE:
    e = mu_store_create(s, &w, 0, &err);
    break;
  case MU_EV_UPDATE:
    w.dir = 0;
    e = mu_store_update(s, &w, &err);
    break;
  case MU_EV_CAS:
    e = mu_store_cas(s, &w, &err);
    break;
  case MU_EV_DELETE:
    e = mu_store_delete(s, key, 1, 1, &err);
    break;
  case MU_EV_CAD:
    e = mu_store_cad(s, key, NULL, 0, &err);
    break;
  case MU_EV_EXPIRE:
    e = mu_store_expire_key(s, key);
    break;
  default:
    break;
  }
  const char *why = NULL;
  if (e == NULL)
    why = "a write that fails against the recovered state";
  else if (e->index != r->index)
    why = "a write that lands on another index";
  mu_v2_err_release(&err);
  mu_free(key);
  if (why == NULL)
    keep_logged_json(s, r);
  return why;
}

static int replay_segment(struct mu_persist *p, const char *path, int last,
                          struct mu_persist_report *rep, char *err, size_t errlen)
{
  struct mu_store *s = p->s;
  unsigned char *data = NULL;
  size_t size = 0;
  struct mu_wal_reader rd;
  int rc = open_records(path, "log", &data, &size, &rd, err, errlen);
  if (rc != 0)
    return rc;
  const unsigned char *pl = NULL;
  size_t len = 0;
  rc = 0;
  for (;;) {
    size_t at = rd.off;
    int st = mu_wal_read(&rd, &pl, &len);
    if (st == MU_WAL_END)
      break;
    if (st == MU_WAL_TORN) {
      size_t n = strlen(rep->warning);
      snprintf(rep->warning + n, sizeof(rep->warning) - n,
               "%slog '%s' has a torn tail at byte offset %zu (%s): dropped %zu bytes "
               "(a write that never became durable)",
               n > 0 ? "; " : "", path, at, rd.why, size - at);
      if (last) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)at) != 0 || fsync(fd) != 0) {
          snprintf(err, errlen, "cannot truncate the torn tail of '%s' at byte offset %zu: %s",
                   path, at, strerror(errno));
          rc = MU_EIO;
        }
        if (fd >= 0)
          close(fd);
      }
      break;
    }
    struct mu_wal_rec r;
    const char *why = NULL;
    if (st == MU_WAL_CORRUPT)
      why = rd.why;
    else if (mu_wal_rec_decode(pl, len, &r) != 0)
      why = "an undecodable record";
    else if (r.type == MU_REC_RDZV) {
      keep_rdzv(p, &r);
    } else if (r.index <= s->index)
      rep->skipped++;
    else if (r.index != s->index + 1)
      why = "a gap in the log (records are missing before this one)";
    else
      why = apply(s, &r);
    if (why != NULL) {
      snprintf(err, errlen,
               "log '%s' is corrupt at byte offset %zu: %s; musterd will not start from a log "
               "with damage before its last record (restore the data dir from a backup; a torn "
               "tail alone would have been truncated with a warning)",
               path, at, why);
      rc = MU_EPARSE;
      break;
    }
  }
  mu_free(data);
  return rc;
}

static void count_nodes(const struct mu_node *n, uint64_t *keys, uint64_t *dirs)
{
  for (uint32_t i = 0; i < n->nchildren; i++) {
    const struct mu_node *c = n->children[i];
    if (c->is_dir) {
      (*dirs)++;
      count_nodes(c, keys, dirs);
    } else {
      (*keys)++;
    }
  }
}

int mu_fsync_mode_parse(const char *name, enum mu_fsync_mode *out)
{
  if (strcmp(name, "batch") == 0)
    *out = MU_FSYNC_BATCH;
  else if (strcmp(name, "always") == 0)
    *out = MU_FSYNC_ALWAYS;
  else if (strcmp(name, "off") == 0)
    *out = MU_FSYNC_OFF;
  else
    return MU_EINVAL;
  return 0;
}

const char *mu_fsync_mode_name(enum mu_fsync_mode m)
{
  return m == MU_FSYNC_ALWAYS ? "always" : m == MU_FSYNC_OFF ? "off" : "batch";
}

struct mu_persist *mu_persist_open(const char *dir, enum mu_fsync_mode mode,
                                   uint64_t snapshot_every, struct mu_store *s,
                                   struct mu_rdzv *rdzv, uv_loop_t *loop,
                                   struct mu_persist_report *rep, char *err, size_t errlen)
{
  uint64_t t0 = uv_hrtime();
  struct mu_persist *p = mu_calloc(1, sizeof(*p));
  struct listing l = {NULL, NULL, 0, 0};
  char *path = NULL;
  int ok = 0;
  memset(rep, 0, sizeof(*rep));
  p->dir = mu_strdup(dir);
  p->mode = mode;
  p->snapshot_every = snapshot_every;
  p->s = s;
  p->rdzv = rdzv;
  p->loop = loop;
  p->lock_fd = -1;
  p->fd = -1;
  mu_buf_init(&p->pending, BUF_MAX);
  mu_buf_init(&p->inflight, BUF_MAX);
  uv_mutex_init(&p->mu);
  uv_cond_init(&p->cond);

  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, errlen,
             "cannot create data dir '%s': %s (create it, or pick another with "
             "--data-dir)",
             dir, strerror(errno));
    goto out;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "data dir '%s' is not a directory (pick another with --data-dir)", dir);
    goto out;
  }
  path = mu_asprintf("%s/LOCK", dir);
  p->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (p->lock_fd < 0) {
    snprintf(err, errlen, "cannot open '%s': %s (is the data dir writable?)", path,
             strerror(errno));
    goto out;
  }
  if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    snprintf(err, errlen,
             "data dir '%s' is in use by another musterd (it holds the lock on '%s'); stop it "
             "or pick another --data-dir",
             dir, path);
    goto out;
  }
  mu_free(path);
  path = mu_asprintf("%s/snap.tmp", dir);
  unlink(path); /* a snapshot that never completed */
  mu_free(path);
  path = NULL;
  if (list_dir(dir, &l) != 0) {
    snprintf(err, errlen, "cannot list data dir '%s': %s", dir, strerror(errno));
    goto out;
  }
  if (l.nsnaps > 0) {
    path = snap_path(dir, l.snaps[l.nsnaps - 1]);
    if (load_snapshot(p, path, rep, err, errlen) != 0)
      goto out;
    mu_free(path);
    path = NULL;
  }
  uint64_t before = s->index;
  for (size_t i = 0; i < l.nwals; i++) {
    /* a segment started before the snapshot holds nothing newer: compaction was interrupted
     * before it could delete it */
    if (l.wals[i] <= rep->snapshot_index)
      continue;
    path = wal_path(dir, l.wals[i]);
    if (l.wals[i] > s->index + 1) {
      snprintf(err, errlen,
               "log '%s' starts at index %llu but the snapshot and the logs before it end at "
               "index %llu: records are missing (restore the data dir from a backup)",
               path, (unsigned long long)l.wals[i], (unsigned long long)s->index);
      goto out;
    }
    if (replay_segment(p, path, i + 1 == l.nwals, rep, err, errlen) != 0)
      goto out;
    rep->segments++;
    mu_free(path);
    path = NULL;
  }
  rep->records = s->index - before;
  p->since_snap = s->index - rep->snapshot_index; /* the log to replay next time */

  /* append to the newest segment, or start one */
  p->seg_first =
      l.nwals > 0 && l.wals[l.nwals - 1] > rep->snapshot_index ? l.wals[l.nwals - 1] : s->index + 1;

  if (p->rdzv_blob != NULL && rdzv != NULL) {
    if (mu_rdzv_restore(rdzv, p->rdzv_blob, p->rdzv_len) != 0) {
      snprintf(err, errlen,
               "the rendezvous state in data dir '%s' does not decode (written by another "
               "version?); move the data dir away to start empty",
               dir);
      goto out;
    }
    for (struct mu_rdzv_run *run = mu_rdzv_next_run(rdzv, NULL); run != NULL;
         run = mu_rdzv_next_run(rdzv, run))
      rep->runs++;
  }
  mu_free(p->rdzv_blob);
  p->rdzv_blob = NULL;
  path = wal_path(dir, p->seg_first);
  p->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (p->fd < 0 || sync_dir(dir) != 0) {
    snprintf(err, errlen, "cannot open log '%s' for writing: %s", path, strerror(errno));
    goto out;
  }

  /* /v2/stats/store counts what this process served, as etcd's do: not the replay */
  memset(&s->stats, 0, sizeof(s->stats));

  /* from here on every write is logged */
  s->on_commit = on_commit;
  s->on_commit_data = p;
  if (rdzv != NULL)
    mu_rdzv_set_change_hook(rdzv, on_rdzv_change, p);
  rep->expired = mu_store_expire(s, mu_now_ns());
  if (p->appended > 0) {
    int rc = flush_sync(p);
    if (rc != 0) {
      snprintf(err, errlen, "cannot write log '%s': %s", path, strerror(-rc));
      goto out;
    }
  }
  mu_ttl_arm(&s->ttl);
  count_nodes(s->root, &rep->keys, &rep->dirs);
  rep->index = s->index;
  rep->events = s->history.count;

  if (mode == MU_FSYNC_BATCH) {
    if (uv_thread_create(&p->thread, sync_thread, p) != 0) {
      snprintf(err, errlen, "cannot start the log sync thread");
      goto out;
    }
    p->thread_started = 1;
  }
  uv_async_init(loop, &p->async, on_async);
  p->async.data = p;
  uv_idle_init(loop, &p->kick);
  p->kick.data = p;
  uv_unref((uv_handle_t *)&p->kick);
  uv_unref((uv_handle_t *)&p->async);
  p->handles_open = 2;
  ok = 1;
out:
  listing_release(&l);
  mu_free(path);
  rep->elapsed_ms = (double)(uv_hrtime() - t0) / 1e6;
  if (!ok) {
    s->on_commit = NULL;
    s->on_commit_data = NULL;
    if (rdzv != NULL)
      mu_rdzv_set_change_hook(rdzv, NULL, NULL);
    mu_persist_free(p);
    return NULL;
  }
  return p;
}

/* ---------------------------------------------------------------------------------------------
 * Module, stop, free
 */

static void handle_closed(uv_handle_t *h)
{
  struct mu_persist *p = h->data;
  p->handles_open--;
  if (p->srv != NULL)
    rv_server_unref(p->srv);
}

static void stop_thread(struct mu_persist *p)
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
static void stop_logging(struct mu_persist *p)
{
  if (p->stopped)
    return;
  if (p->fd >= 0) {
    int rc = flush_sync(p);
    if (rc != 0)
      mu_log(MU_LOG_ERROR, "data dir '%s': final log sync failed: %s", p->dir, strerror(-rc));
  }
  stop_thread(p);
  p->stopped = 1;
}

int mu_persist_stop(struct mu_persist *p)
{
  if (p == NULL || p->stopped)
    return 0;
  int rc = 0;
  if (p->since_snap > 0 && !p->failed)
    rc = mu_persist_snapshot(p);
  if (rc == 0)
    rc = flush_sync(p);
  release_held(p);
  stop_thread(p);
  p->stopped = 1;
  p->s->on_commit = NULL;
  p->s->on_commit_data = NULL;
  if (p->rdzv != NULL)
    mu_rdzv_set_change_hook(p->rdzv, NULL, NULL);
  return rc;
}

void mu_persist_close(struct mu_persist *p)
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

static void persist_close(struct rv_server *srv, void *data)
{
  (void)srv;
  mu_persist_close(data);
}

static void persist_metrics(struct rv_server *srv, void *data, struct mu_buf *out)
{
  struct mu_persist *p = data;
  (void)srv;
  mu_buf_printf(out,
                "# TYPE musterd_wal_records_total counter\nmusterd_wal_records_total %llu\n"
                "# TYPE musterd_wal_fsyncs_total counter\nmusterd_wal_fsyncs_total %llu\n"
                "# TYPE musterd_wal_bytes_total counter\nmusterd_wal_bytes_total %llu\n"
                "# TYPE musterd_wal_max_batch_bytes gauge\nmusterd_wal_max_batch_bytes %llu\n"
                "# TYPE musterd_wal_held_replies_total counter\n"
                "musterd_wal_held_replies_total %llu\n"
                "# TYPE musterd_snapshots_total counter\nmusterd_snapshots_total %llu\n",
                (unsigned long long)p->appended, (unsigned long long)p->m_syncs,
                (unsigned long long)p->m_bytes, (unsigned long long)p->m_max_batch,
                (unsigned long long)p->m_held, (unsigned long long)p->m_snapshots);
}

void mu_persist_attach(struct mu_persist *p, struct rv_server *srv)
{
  p->srv = srv;
  struct rv_module m = {"persist", p, persist_close, persist_metrics};
  rv_server_add_module(srv, &m);
}

void mu_persist_free(struct mu_persist *p)
{
  if (p == NULL)
    return;
  stop_thread(p);
  while (p->held_head != NULL) {
    struct held *h = p->held_head;
    held_unlink(p, h);
    held_free(h);
  }
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
