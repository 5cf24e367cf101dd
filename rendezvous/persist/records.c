/* Records: the data dir's files and names, a store write as a log record, the rendezvous state
 * as one record (snapshots) and each change of it as one (the log). Snapshots and the compactor
 * are in snapshot.c (see persist.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "fsutil.h"
#include "http.h"
#include "persist_int.h"
#include "rdzv.h"
#include "store.h"

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

char *persist_wal_path(const char *dir, uint64_t seq, uint64_t first)
{
  if (seq == 0)
    return mu_asprintf("%s/wal-%020llu.log", dir, (unsigned long long)first);
  return mu_asprintf("%s/wal-%020llu-%020llu.log", dir, (unsigned long long)seq,
                     (unsigned long long)first);
}

int persist_seg_covered(const struct persist_seg *g, uint64_t index, uint64_t next_seq)
{
  if (next_seq > 0)
    return g->seq < next_seq;
  return g->seq == 0 && g->first <= index;
}

/* Parses the 20 digits at `s`. Returns: 1 with *v, else 0. */
static int parse_digits(const char *s, uint64_t *v)
{
  *v = 0;
  for (size_t i = 0; i < 20; i++) {
    if (s[i] < '0' || s[i] > '9')
      return 0;
    *v = *v * 10 + (uint64_t)(s[i] - '0');
  }
  return 1;
}

/* Parses "<prefix><20 digits><suffix>". Returns: 1 with *index, else 0. */
static int parse_name(const char *name, const char *prefix, const char *suffix, uint64_t *index)
{
  size_t pl = strlen(prefix), sl = strlen(suffix);
  if (strlen(name) != pl + 20 + sl || strncmp(name, prefix, pl) != 0 ||
      strcmp(name + pl + 20, suffix) != 0)
    return 0;
  return parse_digits(name + pl, index);
}

/* Parses a segment's name, "wal-<seq>-<first>.log" or "wal-<first>.log". Returns: 1 or 0. */
static int parse_seg_name(const char *name, struct persist_seg *g)
{
  g->seq = 0;
  if (parse_name(name, "wal-", ".log", &g->first))
    return 1;
  return strlen(name) == 4 + 20 + 1 + 20 + 4 && strncmp(name, "wal-", 4) == 0 && name[24] == '-' &&
         strcmp(name + 45, ".log") == 0 && parse_digits(name + 4, &g->seq) &&
         parse_digits(name + 25, &g->first) && g->seq > 0;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Log order: the unnumbered segments by index, then the numbered ones by number. */
static int cmp_seg(const void *a, const void *b)
{
  const struct persist_seg *x = a, *y = b;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return cmp_u64(&x->first, &y->first);
}

void persist_listing_release(struct persist_listing *l)
{
  mu_free(l->snaps);
  mu_free(l->wals);
  memset(l, 0, sizeof(*l));
}

/* Makes room for one more element of `size` bytes in the growing array *a of *n (capacity
 * *cap). Returns: where it goes. */
static void *grow(void *a, size_t size, size_t n, size_t *cap, void **out)
{
  if (n == *cap) {
    *cap = *cap ? *cap * 2 : 8;
    a = mu_realloc(a, *cap * size);
  }
  *out = (char *)a + n * size;
  return a;
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
    struct persist_seg g;
    void *at;
    if (parse_name(de->d_name, "snap-", ".snap", &v)) {
      l->snaps = grow(l->snaps, sizeof(*l->snaps), l->nsnaps++, &cs, &at);
      memcpy(at, &v, sizeof(v));
    } else if (parse_seg_name(de->d_name, &g)) {
      l->wals = grow(l->wals, sizeof(*l->wals), l->nwals++, &cw, &at);
      memcpy(at, &g, sizeof(g));
    }
  }
  closedir(d);
  if (l->nsnaps > 1)
    qsort(l->snaps, l->nsnaps, sizeof(*l->snaps), cmp_u64);
  if (l->nwals > 1)
    qsort(l->wals, l->nwals, sizeof(*l->wals), cmp_seg);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Records
 */

void persist_event_rec(struct wal_rec *r, int type, const struct v2_event *e)
{
  memset(r, 0, sizeof(*r));
  if (e->json == NULL) /* not logged through persist_encode_event() (a store of its own) */
    v2_json_event_render((struct v2_event *)e);
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
  size_t len;
  v2_store_event_json(s, e, &len); /* rendered where the history counts it */
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
