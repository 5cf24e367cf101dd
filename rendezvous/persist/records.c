/* Records and snapshots: the data dir's files and names, a store write as a log record, the
 * rendezvous state as one record (snapshots) and each change of it as one (the log), and
 * snapshot writing with compaction (see persist.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "fsutil.h"
#include "persist_int.h"
#include "rdzv.h"
#include "store.h"

#define SNAP_CHUNK ((size_t)4 << 20) /* snapshot bytes gathered before each write() */

/* ---------------------------------------------------------------------------------------------
 * Files
 */

int persist_write(int fd, const void *p, size_t n)
{
  errno = 0;
  int rc = mu_write_all(fd, p, n);
  return rc == 0 ? 0 : errno != 0 ? -errno : -EIO;
}

int persist_sync_dir(const char *dir)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return -errno;
  int rc = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return rc;
}

char *persist_snap_path(const char *dir, uint64_t index)
{
  return mu_asprintf("%s/snap-%020llu.snap", dir, (unsigned long long)index);
}

char *persist_wal_path(const char *dir, uint64_t first)
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

void persist_listing_release(struct persist_listing *l)
{
  mu_free(l->snaps);
  mu_free(l->wals);
  memset(l, 0, sizeof(*l));
}

/* Appends v to the growing array *a of *n (capacity *cap). */
static void push_u64(uint64_t **a, size_t *n, size_t *cap, uint64_t v)
{
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 8;
    *a = mu_realloc(*a, *cap * sizeof(**a));
  }
  (*a)[(*n)++] = v;
}

int persist_list_dir(const char *dir, struct persist_listing *l)
{
  memset(l, 0, sizeof(*l));
  DIR *d = opendir(dir);
  if (d == NULL)
    return -errno;
  size_t cs = 0, cw = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    uint64_t v;
    if (parse_name(de->d_name, "snap-", ".snap", &v))
      push_u64(&l->snaps, &l->nsnaps, &cs, v);
    else if (parse_name(de->d_name, "wal-", ".log", &v))
      push_u64(&l->wals, &l->nwals, &cw, v);
  }
  closedir(d);
  if (l->nsnaps > 1)
    qsort(l->snaps, l->nsnaps, sizeof(*l->snaps), cmp_u64);
  if (l->nwals > 1)
    qsort(l->wals, l->nwals, sizeof(*l->wals), cmp_u64);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Records
 */

void persist_event_rec(struct wal_rec *r, int type, const struct v2_event *e)
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
  r->flags = (uint8_t)((e->refresh ? WAL_REC_REFRESH : 0) | (e->created ? WAL_REC_CREATED : 0) |
                       (e->node_dir ? WAL_REC_DIR : 0));
}

int persist_encode_event(struct mu_buf *out, struct v2_store *s, const struct v2_event *e)
{
  struct wal_rec r;
  persist_event_rec(&r, WAL_REC_EVENT, e);
  if (e->action != V2_EV_DELETE && e->action != V2_EV_CAD && e->action != V2_EV_EXPIRE) {
    const struct v2_node *n = v2_store_lookup(s, e->key);
    if (n != NULL) {
      r.expire_ns = n->expire_ns;
      if (n->is_dir) {
        r.flags |= WAL_REC_DIR;
      } else {
        r.flags |= WAL_REC_HAS_VALUE;
        r.value = n->value;
        r.value_len = n->value_len;
      }
    }
  }
  return wal_rec_put(out, &r);
}

/* Appends `body` (when `rc` is 0) as one rendezvous record of `type`, then releases it.
 * Returns: 0, or the error (rc's, or MU_E2BIG from the encoder). */
static int put_rdzv_record(struct persist *p, int type, struct mu_buf *body, int rc,
                           struct mu_buf *out)
{
  struct wal_rec r;
  memset(&r, 0, sizeof(r));
  r.type = (uint8_t)type;
  r.index = p->s->index;
  r.flags = WAL_REC_HAS_VALUE;
  r.value = body->data;
  r.value_len = (uint32_t)body->len;
  if (rc == 0)
    rc = wal_rec_put(out, &r);
  mu_buf_release(body);
  return rc;
}

int persist_put_rdzv(struct persist *p, struct mu_buf *out)
{
  struct mu_buf blob = MU_BUF_INIT(WAL_MAX_RECORD - 4096); /* what one record can carry */
  int rc = rdzv_encode(p->rdzv, &blob);
  return put_rdzv_record(p, WAL_REC_RDZV, &blob, rc, out);
}

int persist_encode_rdzv_change(struct persist *p, const struct rdzv_change *c, struct mu_buf *out)
{
  struct mu_buf body = MU_BUF_INIT(WAL_MAX_RECORD - 4096);
  int rc = rdzv_encode_change(c, &body);
  return put_rdzv_record(p, WAL_REC_RDZV_CHANGE, &body, rc, out);
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
  w->rc = persist_write(w->fd, w->b.data, w->b.len);
  mu_buf_clear(&w->b);
}

/* Appends one record, checked: a record the encoder refuses fails the snapshot. */
static void sw_put(struct snap_writer *w, const struct wal_rec *r)
{
  if (w->rc == 0 && wal_rec_put(&w->b, r) != 0)
    w->rc = -E2BIG;
}

static void snap_nodes(struct snap_writer *w, const struct v2_node *n)
{
  for (uint32_t i = 0; i < n->nchildren && w->rc == 0; i++) {
    const struct v2_node *c = n->children[i];
    struct wal_rec r;
    memset(&r, 0, sizeof(r));
    r.type = WAL_REC_SNAP_NODE;
    r.index = c->modified_index;
    r.created = c->created_index;
    r.expire_ns = c->expire_ns;
    r.key = c->hn.key;
    r.key_len = c->hn.len;
    if (c->is_dir) {
      r.flags = WAL_REC_DIR;
    } else {
      r.flags = WAL_REC_HAS_VALUE;
      r.value = c->value;
      r.value_len = c->value_len;
    }
    sw_put(w, &r);
    w->nodes++;
    sw_flush(w, 0);
    if (c->is_dir)
      snap_nodes(w, c);
  }
}

/* Writes the whole state into the open file of `w`: header, nodes, history, rendezvous,
 * trailer. Returns: 0, or -errno / an encoding error. */
static int snap_write(struct persist *p, struct snap_writer *w)
{
  struct v2_store *s = p->s;
  const struct v2_event_history *h = &s->history;
  struct wal_rec r;
  memset(&r, 0, sizeof(r));
  r.type = WAL_REC_SNAP_HEAD;
  r.index = s->index;
  r.created = s->nodes.n - 1;
  r.aux = h->count;
  sw_put(w, &r);
  snap_nodes(w, s->root);
  for (unsigned i = 0; i < h->count && w->rc == 0; i++) {
    const struct v2_event *e = h->ring[(h->front + i) % h->cap];
    persist_event_rec(&r, WAL_REC_SNAP_EVENT, e);
    sw_put(w, &r);
    sw_flush(w, 0);
  }
  if (p->rdzv != NULL && w->rc == 0) {
    if (persist_put_rdzv(p, &w->b) != 0)
      w->rc = -E2BIG;
  }
  memset(&r, 0, sizeof(r));
  r.type = WAL_REC_SNAP_END;
  r.index = s->index;
  r.created = w->nodes;
  r.aux = h->count;
  sw_put(w, &r);
  sw_flush(w, 1);
  if (w->rc == 0 && fsync(w->fd) != 0)
    w->rc = -errno;
  return w->rc;
}

static void remove_older(struct persist *p, uint64_t snap_index, uint64_t wal_first)
{
  struct persist_listing l;
  if (persist_list_dir(p->dir, &l) != 0)
    return;
  for (size_t i = 0; i < l.nsnaps; i++) {
    if (l.snaps[i] < snap_index) {
      char *path = persist_snap_path(p->dir, l.snaps[i]);
      unlink(path);
      mu_free(path);
    }
  }
  for (size_t i = 0; i < l.nwals; i++) {
    if (l.wals[i] < wal_first) {
      char *path = persist_wal_path(p->dir, l.wals[i]);
      unlink(path);
      mu_free(path);
    }
  }
  persist_listing_release(&l);
}

int persist_snapshot(struct persist *p)
{
  struct v2_store *s = p->s;
  struct snap_writer w = {-1, MU_BUF_INIT(MU_BUF_UNBOUNDED), 0, 0};
  char *tmp = mu_asprintf("%s/snap.tmp", p->dir);
  char *final = persist_snap_path(p->dir, s->index);
  char *seg = NULL;
  int nfd = -1;
  int rc = persist_wait_idle(p);
  if (rc != 0)
    goto out;
  w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (w.fd < 0) {
    rc = -errno;
    goto out;
  }
  rc = snap_write(p, &w);
  if (rc != 0)
    goto out;
  close(w.fd);
  w.fd = -1;
  if (rename(tmp, final) != 0) {
    rc = -errno;
    goto out;
  }
  rc = persist_sync_dir(p->dir); /* the snapshot is durable before any log is dropped */
  if (rc != 0)
    goto out;
  /* The snapshot now covers every record appended so far, synced or not. If the current
   * segment already has the new segment's name, no write advanced the index since it
   * started: it holds only rendezvous records, older than the snapshot, so it is emptied too
   * (replayed after the snapshot they would roll the rendezvous state back). */
  seg = persist_wal_path(p->dir, s->index + 1);
  nfd = open(seg, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (nfd < 0) {
    rc = -errno;
    goto out;
  }
  rc = persist_sync_dir(p->dir);
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
  persist_notify_durable(p);
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
