/* Recovery: opening the data dir (lock), loading the newest snapshot, replaying the log after
 * it (a torn tail is truncated with a warning, damage anywhere else stops musterd), restoring
 * the rendezvous, then logging every write from there on (see persist.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "fsutil.h"
#include "persist_int.h"
#include "rdzv.h"
#include "store.h"

/* Keeps a copy of the newest whole rendezvous state met during recovery (binary: not a
 * string): restored only if no newer one follows, before the first change after it. */
static void keep_rdzv(struct persist *p, const struct wal_rec *r)
{
  mu_free(p->rdzv_blob);
  p->rdzv_blob = mu_malloc((size_t)r->value_len + 1);
  if (r->value_len > 0)
    memcpy(p->rdzv_blob, r->value, r->value_len);
  p->rdzv_len = r->value_len;
}

/* Maps the WAL-format file `path` (`what`: "snapshot" or "log", for the error) read-only and
 * points `rd` at its records. Mapped, not read: a copy of a 1 M-key data dir is ~200 MB of fresh
 * memory, a page fault per 4 KiB, while the mapping takes the page cache's pages as they are
 * (docs/benchmarks.md, "Recovery of 1 M keys"). Returns: 0 with *data and *size (unmap with
 * close_records(); NULL and 0 for an empty file), or MU_EIO with `err` set. */
static int open_records(const char *path, const char *what, unsigned char **data, size_t *size,
                        struct wal_reader *rd, struct mu_buf *err)
{
  struct stat st;
  int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
  *data = NULL;
  *size = 0;
  if (fd < 0 || fstat(fd, &st) != 0) {
    rc = -errno;
  } else if (S_ISDIR(st.st_mode)) {
    rc = -EISDIR;
  } else if (st.st_size > 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) {
      rc = -errno;
    } else {
      *data = m;
      *size = (size_t)st.st_size;
    }
  }
  if (fd >= 0)
    close(fd);
  if (rc != 0) {
    mu_buf_printf(err, "cannot read %s '%s': %s", what, path, mu_strerror(rc));
    return MU_EIO;
  }
  wal_reader_init(rd, *data, *size);
  return 0;
}

static void close_records(unsigned char *data, size_t size)
{
  if (data != NULL)
    munmap(data, size);
}

/* ---------------------------------------------------------------------------------------------
 * The snapshot
 */

/* Where load_snapshot() is in the file's grammar: HEAD (NODE | EVENT | RDZV)* END. */
enum snap_state { SNAP_WANT_HEAD = 0, SNAP_BODY, SNAP_AFTER_END };

struct snap_load {
  enum snap_state state;
  uint64_t nodes, events, index;
  uint64_t next_seq; /* the first log segment it does not cover (0: written before numbering) */
};

/* A history event as the snapshot recorded it. */
static void restore_event(struct v2_store *s, const struct wal_rec *r)
{
  struct v2_event *e = mu_calloc(1, sizeof(*e));
  e->action = (enum v2_event_action)r->action;
  e->index = r->index;
  e->key = mu_strndup(r->key, r->key_len);
  e->key_len = r->key_len;
  e->refresh = (r->flags & WAL_REC_REFRESH) != 0;
  e->created = (r->flags & WAL_REC_CREATED) != 0;
  e->node_dir = (r->flags & WAL_REC_DIR) != 0;
  if (e->node_dir &&
      (e->action == V2_EV_DELETE || e->action == V2_EV_CAD || e->action == V2_EV_EXPIRE))
    e->prev_key = mu_strndup(r->key, r->key_len);
  e->json = mu_strndup(r->json, r->json_len);
  e->json_len = r->json_len;
  e->json_head = r->aux <= r->json_len ? (size_t)r->aux : 0;
  v2_event_history_add(&s->history, e);
}

/* Applies one snapshot record. Returns: NULL, or why the snapshot is damaged (static). */
static const char *snap_record(struct persist *p, struct snap_load *sl, const struct wal_rec *r)
{
  if (sl->state == SNAP_WANT_HEAD) {
    if (r->type != WAL_REC_SNAP_HEAD)
      return "no snapshot header";
    sl->index = r->index;
    sl->next_seq = (uint64_t)r->expire_ns;
    sl->state = SNAP_BODY;
    return NULL;
  }
  if (sl->state == SNAP_AFTER_END)
    return "data after the snapshot trailer";
  switch (r->type) {
  case WAL_REC_SNAP_NODE: {
    char *key = mu_strndup(r->key, r->key_len);
    int rc = v2_store_restore_node(p->s, key, (r->flags & WAL_REC_DIR) != 0, r->value, r->value_len,
                                   r->created, r->index, r->expire_ns);
    mu_free(key);
    sl->nodes++;
    return rc != 0 ? "a node whose parent is missing or that exists twice" : NULL;
  }
  case WAL_REC_SNAP_EVENT:
    restore_event(p->s, r);
    sl->events++;
    return NULL;
  case WAL_REC_RDZV:
    keep_rdzv(p, r);
    return NULL;
  case WAL_REC_SNAP_END:
    sl->state = SNAP_AFTER_END;
    if (r->created != sl->nodes || r->aux != sl->events || r->index != sl->index)
      return "a trailer whose counts do not match the records";
    return NULL;
  default:
    return "an unexpected record type";
  }
}

/* Loads snapshot `path` into p->s (p->rdzv_blob). Returns: 0 with *next_seq (the first segment
 * it does not cover), or an error with `err` set. */
static int load_snapshot(struct persist *p, const char *path, struct persist_report *rep,
                         uint64_t *next_seq, struct mu_buf *err)
{
  unsigned char *data = NULL;
  size_t size = 0;
  struct wal_reader rd;
  int rc = open_records(path, "snapshot", &data, &size, &rd, err);
  if (rc != 0)
    return rc;
  struct snap_load sl = {SNAP_WANT_HEAD, 0, 0, 0, 0};
  const unsigned char *pl = NULL;
  size_t len = 0;
  for (;;) {
    size_t at = rd.off;
    int st = wal_read(&rd, &pl, &len);
    if (st == WAL_END)
      break;
    struct wal_rec r;
    const char *why = NULL;
    if (st != WAL_RECORD)
      why = rd.why;
    else if (wal_rec_decode(pl, len, &r) != 0)
      why = "an undecodable record";
    else
      why = snap_record(p, &sl, &r);
    if (why != NULL) {
      mu_buf_printf(err,
                    "snapshot '%s' is damaged at byte offset %zu: %s; musterd will not start from "
                    "it (restore the data dir from a backup, or move it away to start empty)",
                    path, at, why);
      close_records(data, size);
      return MU_EPARSE;
    }
  }
  close_records(data, size);
  if (sl.state != SNAP_AFTER_END) {
    mu_buf_printf(err,
                  "snapshot '%s' is incomplete (no trailer after %zu bytes); musterd will not "
                  "start from it (restore the data dir from a backup, or move it away to start "
                  "empty)",
                  path, size);
    return MU_EPARSE;
  }
  p->s->index = sl.index;
  *next_seq = sl.next_seq;
  p->snap_file_bytes = size;
  mu_buf_puts(&rep->snapshot, path);
  rep->snapshot_index = sl.index;
  rep->snapshot_nodes = sl.nodes;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The log
 */

/* Restores the whole rendezvous state kept last (forgetting what an older one and the changes
 * after it built). Returns: 0, or -1 when it does not decode. */
static int restore_kept_rdzv(struct persist *p)
{
  int rc = 0;
  if (p->rdzv_blob != NULL && p->rdzv != NULL) {
    rdzv_clear(p->rdzv);
    rc = rdzv_restore(p->rdzv, p->rdzv_blob, p->rdzv_len);
  }
  mu_free(p->rdzv_blob);
  p->rdzv_blob = NULL;
  return rc;
}

/* Applies a logged change of the rendezvous state, in log order. Returns: NULL, or why it does
 * not apply (static). */
static const char *apply_rdzv_change(struct persist *p, const struct wal_rec *r)
{
  if (p->rdzv == NULL)
    return NULL; /* /v1 not served: nothing to rebuild */
  if (restore_kept_rdzv(p) != 0)
    return "a rendezvous state that does not decode";
  if (rdzv_apply_change(p->rdzv, r->value, r->value_len) != 0)
    return "a rendezvous change that does not decode or does not apply to the recovered runs";
  return NULL;
}

/* Replaces the JSON the replayed write rendered now with the one logged at write time. */
static void keep_logged_json(struct v2_store *s, const struct wal_rec *r)
{
  struct v2_event_history *h = &s->history;
  if (h->count == 0 || r->json_len == 0)
    return;
  struct v2_event *e = h->ring[(h->front + h->count - 1) % h->cap];
  if (e->index != r->index)
    return;
  size_t before = v2_event_bytes(e);
  v2_event_set_json(e, mu_strndup(r->json, r->json_len), r->json_len,
                    r->aux <= r->json_len ? (size_t)r->aux : 0);
  v2_event_history_resized(h, e, before);
}

/* Applies one logged write. Returns: NULL, or why it does not apply (static). */
static const char *apply(struct v2_store *s, const struct wal_rec *r)
{
  if (r->type != WAL_REC_EVENT)
    return "a record that is not a store write";
  char *key = mu_strndup(r->key, r->key_len);
  struct v2_err err = {0, NULL, 0};
  struct v2_write w;
  memset(&w, 0, sizeof(w));
  w.key = key;
  w.dir = (r->flags & WAL_REC_DIR) != 0 && !(r->flags & WAL_REC_HAS_VALUE);
  w.value = (r->flags & WAL_REC_HAS_VALUE) ? r->value : NULL;
  w.value_len = (r->flags & WAL_REC_HAS_VALUE) ? r->value_len : 0;
  w.expire_ns = r->expire_ns;
  w.refresh = (r->flags & WAL_REC_REFRESH) != 0;
  const struct v2_event *e = NULL;
  switch (r->action) {
  case V2_EV_SET:
    e = v2_store_set(s, &w, &err);
    break;
  case V2_EV_CREATE:
    e = v2_store_create(s, &w, 0, &err);
    break;
  case V2_EV_UPDATE:
    w.dir = 0;
    e = v2_store_update(s, &w, &err);
    break;
  case V2_EV_CAS:
    e = v2_store_cas(s, &w, &err);
    break;
  case V2_EV_DELETE:
    e = v2_store_delete(s, key, 1, 1, &err);
    break;
  case V2_EV_CAD:
    e = v2_store_cad(s, key, NULL, 0, &err);
    break;
  case V2_EV_EXPIRE:
    e = v2_store_expire_key(s, key);
    break;
  default:
    break;
  }
  const char *why = NULL;
  if (e == NULL)
    why = "a write that fails against the recovered state";
  else if (e->index != r->index)
    why = "a write that lands on another index";
  v2_err_release(&err);
  mu_free(key);
  if (why == NULL)
    keep_logged_json(s, r);
  return why;
}

/* Whether log segment `path` holds no record: empty, or zeros only. */
static int segment_empty(const char *path)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  char buf[4096];
  ssize_t n;
  int empty = 1;
  while (empty && (n = read(fd, buf, sizeof(buf))) > 0)
    for (ssize_t i = 0; i < n; i++)
      if (buf[i] != 0) {
        empty = 0;
        break;
      }
  if (n < 0)
    empty = 0;
  close(fd);
  return empty;
}

/* A torn tail at `at` of segment `path`: noted in the report (unless it is only the zeros
 * written ahead of the log, `padding`), and cut off the last segment, so that the log goes on
 * right after its last record. Returns: 0, or MU_EIO with `err` set. */
static int torn_tail(const char *path, int last, size_t at, size_t size, const char *why,
                     int padding, struct persist_report *rep, struct mu_buf *err)
{
  if (!padding)
    mu_buf_printf(&rep->warning,
                  "%slog '%s' has a torn tail at byte offset %zu (%s): dropped %zu bytes (a "
                  "write that never became durable)",
                  rep->warning.len > 0 ? "; " : "", path, at, why, size - at);
  if (!last)
    return 0;
  int rc = 0;
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)at) != 0 || fsync(fd) != 0) {
    mu_buf_printf(err, "cannot truncate the torn tail of '%s' at byte offset %zu: %s", path, at,
                  strerror(errno));
    rc = MU_EIO;
  }
  if (fd >= 0)
    close(fd);
  return rc;
}

static int replay_segment(struct persist *p, const char *path, int last, struct persist_report *rep,
                          struct mu_buf *err)
{
  struct v2_store *s = p->s;
  unsigned char *data = NULL;
  size_t size = 0;
  struct wal_reader rd;
  int rc = open_records(path, "log", &data, &size, &rd, err);
  if (rc != 0)
    return rc;
  const unsigned char *pl = NULL;
  size_t len = 0;
  p->since_bytes += size;
  for (;;) {
    size_t at = rd.off;
    int st = wal_read(&rd, &pl, &len);
    if (st == WAL_END)
      break;
    if (st == WAL_TORN) {
      p->since_bytes -= size - at;
      rc = torn_tail(path, last, at, size, rd.why, rd.padding, rep, err);
      break;
    }
    struct wal_rec r;
    const char *why = NULL;
    if (st == WAL_CORRUPT)
      why = rd.why;
    else if (wal_rec_decode(pl, len, &r) != 0)
      why = "an undecodable record";
    else if (r.type == WAL_REC_RDZV)
      keep_rdzv(p, &r);
    else if (r.type == WAL_REC_RDZV_CHANGE)
      why = apply_rdzv_change(p, &r);
    else if (r.index <= s->index)
      rep->skipped++;
    else if (r.index != s->index + 1)
      why = "a gap in the log (records are missing before this one)";
    else
      why = apply(s, &r);
    if (why != NULL) {
      mu_buf_printf(err,
                    "log '%s' is corrupt at byte offset %zu: %s; musterd will not start from a "
                    "log with damage before its last record (restore the data dir from a backup; "
                    "a torn tail alone would have been truncated with a warning)",
                    path, at, why);
      rc = MU_EPARSE;
      break;
    }
  }
  close_records(data, size);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Opening, step by step
 */

static void count_nodes(const struct v2_node *n, uint64_t *keys, uint64_t *dirs)
{
  for (uint32_t i = 0; i < n->nchildren; i++) {
    const struct v2_node *c = n->children[i];
    if (c->is_dir) {
      (*dirs)++;
      count_nodes(c, keys, dirs);
    } else {
      (*keys)++;
    }
  }
}

/* Step 1: the dir exists, is ours alone (LOCK), and holds no half-written snapshot.
 * Returns: 0, or -1 with `err` set. */
static int lock_dir(struct persist *p, struct mu_buf *err)
{
  const char *dir = p->dir;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    mu_buf_printf(err,
                  "cannot create data dir '%s': %s (create it, or pick another with "
                  "--data-dir)",
                  dir, strerror(errno));
    return -1;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    mu_buf_printf(err, "data dir '%s' is not a directory (pick another with --data-dir)", dir);
    return -1;
  }
  char *path = mu_asprintf("%s/LOCK", dir);
  int rc = -1;
  p->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (p->lock_fd < 0) {
    mu_buf_printf(err, "cannot open '%s': %s (is the data dir writable?)", path, strerror(errno));
    goto out;
  }
  if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    mu_buf_printf(err,
                  "data dir '%s' is in use by another musterd (it holds the lock on '%s'); stop "
                  "it or pick another --data-dir",
                  dir, path);
    goto out;
  }
  mu_free(path);
  path = mu_asprintf("%s/snap.tmp", dir);
  unlink(path); /* a snapshot that never completed */
  rc = 0;
out:
  mu_free(path);
  return rc;
}

/* Step 2: the newest snapshot, then every log segment it does not cover, in log order (a torn
 * tail of the last one is cut off with `truncate`, else only reported). The numbered segments
 * after the snapshot must follow each other from the first one it does not cover (1 without a
 * snapshot, or after one written before segments were numbered). Returns: 0, or -1. */
static int load_state(struct persist *p, struct persist_listing *l, int truncate,
                      struct persist_report *rep, struct mu_buf *err)
{
  struct v2_store *s = p->s;
  uint64_t next_seq = 0;
  if (l->nsnaps > 0) {
    char *path = persist_snap_path(p->dir, l->snaps[l->nsnaps - 1]);
    int rc = load_snapshot(p, path, rep, &next_seq, err);
    mu_free(path);
    if (rc != 0)
      return -1;
  }
  uint64_t before = s->index, want = next_seq > 0 ? next_seq : 1;
  const struct persist_seg *last = NULL;
  int fresh = 0; /* the newest segment was empty and misnamed: removed, a new one is made */
  p->since_bytes = 0;
  for (size_t i = 0; i < l->nwals; i++) {
    const struct persist_seg *g = &l->wals[i];
    /* a segment the snapshot covers holds nothing newer: compaction was interrupted before it
     * could delete it */
    if (l->nsnaps > 0 && persist_seg_covered(g, rep->snapshot_index, next_seq))
      continue;
    char *path = persist_wal_path(p->dir, g->seq, g->first);
    int rc = -1;
    if (truncate && i + 1 == l->nwals && g->seq > 0 && g->seq == want && g->first > s->index + 1 &&
        segment_empty(path)) {
      /* a snapshot started: the loop created this segment, named after the index then, and
       * the last batch of the one before it never became durable (nothing after it can have:
       * batches are written in order). Those writes were not acknowledged: the log goes on in
       * a segment of that number named after the index reached. */
      mu_buf_printf(&rep->warning,
                    "%slog '%s' is empty and named for index %llu, but the log before it ends at "
                    "index %llu (the writes in between were never durable): replaced by a "
                    "segment that starts at index %llu",
                    rep->warning.len > 0 ? "; " : "", path, (unsigned long long)g->first,
                    (unsigned long long)s->index, (unsigned long long)s->index + 1);
      rc = unlink(path) == 0 ? persist_sync_dir(p->dir) : -errno;
      if (rc != 0)
        mu_buf_printf(err, "cannot remove the empty log '%s': %s", path, strerror(-rc));
      mu_free(path);
      if (rc != 0)
        return -1;
      fresh = 1;
      break;
    }
    if (g->seq > 0 && g->seq != want) {
      mu_buf_printf(err,
                    "log '%s' is segment %llu but the next one after the snapshot and the logs "
                    "before it is segment %llu: a log segment is missing (restore the data dir "
                    "from a backup)",
                    path, (unsigned long long)g->seq, (unsigned long long)want);
    } else if (g->first > s->index + 1) {
      mu_buf_printf(err,
                    "log '%s' starts at index %llu but the snapshot and the logs before it end at "
                    "index %llu: records are missing (restore the data dir from a backup)",
                    path, (unsigned long long)g->first, (unsigned long long)s->index);
    } else {
      rc = replay_segment(p, path, truncate && i + 1 == l->nwals, rep, err);
    }
    mu_free(path);
    if (rc != 0)
      return -1;
    rep->segments++;
    if (g->seq > 0)
      want = g->seq + 1;
    last = g;
  }
  rep->records = s->index - before;
  p->since_snap = s->index - rep->snapshot_index; /* the log to replay next time */
  /* append to the newest segment, or start the next one */
  p->seg_seq = last != NULL && !fresh ? last->seq : want;
  p->seg_first = last != NULL && !fresh ? last->first : s->index + 1;
  return 0;
}

/* Step 3: the newest whole rendezvous state found, if no change followed it (the changes
 * were applied in log order, step 2). Returns: 0, or -1. */
static int restore_rdzv(struct persist *p, struct persist_report *rep, struct mu_buf *err)
{
  if (restore_kept_rdzv(p) != 0) {
    mu_buf_printf(err,
                  "the rendezvous state in data dir '%s' does not decode (written by another "
                  "version?); move the data dir away to start empty",
                  p->dir);
    return -1;
  }
  for (struct rdzv_run *run = p->rdzv != NULL ? rdzv_next_run(p->rdzv, NULL) : NULL; run != NULL;
       run = rdzv_next_run(p->rdzv, run))
    rep->runs++;
  return 0;
}

int persist_load(struct persist *p, struct persist_listing *l, int truncate,
                 struct persist_report *rep, struct mu_buf *err)
{
  if (load_state(p, l, truncate, rep, err) != 0 || restore_rdzv(p, rep, err) != 0)
    return -1;
  return 0;
}

/* Step 4: the segment to append to, the hooks that log every write from now on, and the keys
 * whose deadline passed while musterd was down. Returns: 0, or -1. */
static int start_logging(struct persist *p, struct persist_report *rep, struct mu_buf *err)
{
  struct v2_store *s = p->s;
  char *path = persist_wal_path(p->dir, p->seg_seq, p->seg_first);
  int rc = -1;
  p->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (p->fd < 0 || persist_sync_dir(p->dir) != 0) {
    mu_buf_printf(err, "cannot open log '%s' for writing: %s", path, strerror(errno));
    goto out;
  }
  off_t end = lseek(p->fd, 0, SEEK_END); /* recovery cut off any zeros written ahead */
  p->seg_bytes = end > 0 ? (int64_t)end : 0;
  p->written_to = p->seg_bytes; /* the records logged from here on go after it */
  p->zero_fd = -1;
  /* /v2/stats/store counts what this process served, as etcd's do: not the replay */
  memset(&s->stats, 0, sizeof(s->stats));
  s->on_commit = persist_on_commit;
  s->on_commit_data = p;
  if (p->rdzv != NULL)
    rdzv_set_change_hook(p->rdzv, persist_on_rdzv_change, p);
  rep->expired = v2_store_expire(s, v2_now_ns());
  if (p->appended > 0) {
    int src = persist_flush_sync(p);
    if (src != 0) {
      mu_buf_printf(err, "cannot write log '%s': %s", path, strerror(-src));
      goto out;
    }
  }
  v2_ttl_arm(&s->ttl);
  count_nodes(s->root, &rep->keys, &rep->dirs);
  rep->index = s->index;
  rep->events = s->history.count;
  rc = 0;
out:
  mu_free(path);
  return rc;
}

void persist_report_release(struct persist_report *rep)
{
  if (rep == NULL)
    return;
  mu_buf_release(&rep->snapshot);
  mu_buf_release(&rep->warning);
}

struct persist *persist_open(const char *dir, enum persist_fsync mode, uint64_t snapshot_every,
                             uint64_t snapshot_bytes, struct v2_store *s, struct rdzv *rdzv,
                             uv_loop_t *loop, struct persist_report *rep, struct mu_buf *err)
{
  uint64_t t0 = uv_hrtime();
  struct persist *p = mu_calloc(1, sizeof(*p));
  struct persist_listing l = {NULL, NULL, 0, 0};
  int ok = 0;
  memset(rep, 0, sizeof(*rep));
  mu_buf_init(&rep->snapshot, MU_BUF_UNBOUNDED);
  mu_buf_init(&rep->warning, MU_BUF_UNBOUNDED);
  p->dir = mu_strdup(dir);
  p->mode = mode;
  p->snapshot_every = snapshot_every;
  p->snapshot_bytes = snapshot_bytes;
  p->s = s;
  p->rdzv = rdzv;
  p->loop = loop;
  p->lock_fd = -1;
  p->fd = -1;
  p->zero_fd = -1;
  mu_buf_init(&p->pending, MU_BUF_UNBOUNDED);
  mu_buf_init(&p->inflight, MU_BUF_UNBOUNDED);
  uv_mutex_init(&p->mu);
  uv_cond_init(&p->cond);
  if (lock_dir(p, err) != 0)
    goto out;
  if (persist_list_dir(dir, &l) != 0) {
    mu_buf_printf(err, "cannot list data dir '%s': %s", dir, strerror(errno));
    goto out;
  }
  if (persist_load(p, &l, 1, rep, err) != 0 || start_logging(p, rep, err) != 0 ||
      persist_start(p, err) != 0)
    goto out;
  ok = 1;
out:
  persist_listing_release(&l);
  rep->elapsed_ms = (double)(uv_hrtime() - t0) / 1e6;
  if (!ok) {
    s->on_commit = NULL;
    s->on_commit_data = NULL;
    if (rdzv != NULL)
      rdzv_set_change_hook(rdzv, NULL, NULL);
    persist_free(p);
    return NULL;
  }
  return p;
}
