/* Snapshots and the compactor: the whole state written to a snapshot file, on the loop
 * (persist_snapshot()) or by the compactor thread from the files while musterd serves (see
 * persist.h and the comment below). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "persist_int.h"
#include "rdzv.h"
#include "store.h"

#define SNAP_CHUNK ((size_t)4 << 20) /* snapshot bytes gathered before each write() */

/* ---------------------------------------------------------------------------------------------
 * Snapshots
 *
 * A snapshot is the whole store at one index, written to snap.tmp, fsync()ed, renamed to
 * snap-<index>.snap and the dir fsync()ed; only then are the older snapshots and log segments
 * deleted, so a crash at any point leaves a snapshot and the whole log after it.
 *
 * While musterd serves, a snapshot is built by the compactor thread from the files, sharing no
 * memory with the loop: the loop switches the log to a new segment, numbered one more than the
 * current one (records appended before go to the old one: the sync thread writes its last batch
 * there; later ones to the new one), and once that batch is durable starts the thread, which
 * loads the previous snapshot and the closed segments into a store (and a rendezvous) of its own
 * with recovery's code (persist_load()), writes the snapshot of that state, recording the new
 * segment's number as the first one it does not cover, installs it, and reports through the
 * log's async handle. The segments are numbered, not named by index, so that a snapshot needs no
 * store write since the last one: rendezvous changes alone (logged at the same index) get a
 * snapshot and a segment of their own too (a snapshot at the same index replaces the older one).
 * The loop's cost does not grow with the store (a fork() copied ~235 MB of page tables at 1 M keys:
 * 45-81 ms); the memory does, twice the state while it runs. The old segment is deleted only once
 * the snapshot is durable; a failed snapshot leaves both segments, which recovery replays in turn.
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

/* Writes the whole state into the open file of `w`: header (with `next_seq`, the first segment
 * it does not cover), nodes, history, the rendezvous record `rdzv` (encoded already; empty:
 * none), trailer; then fsync()s it. Returns: 0, or -errno / -E2BIG. */
static int snap_write(struct v2_store *s, const struct mu_buf *rdzv, uint64_t next_seq,
                      struct snap_writer *w)
{
  const struct v2_event_history *h = &s->history;
  struct wal_rec r;
  memset(&r, 0, sizeof(r));
  r.type = WAL_REC_SNAP_HEAD;
  r.index = s->index;
  r.expire_ns = (int64_t)next_seq;
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
  if (rdzv->len > 0 && w->rc == 0) { /* written from where it is: no copy of the whole state */
    sw_flush(w, 1);
    if (w->rc == 0)
      w->rc = persist_write(w->fd, rdzv->data, rdzv->len);
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

/* Writes the snapshot of `s` to `tmp` (created or emptied), fsync()ed and closed, with the
 * buffer `b`. Returns: 0, or -errno; *bytes the size of the file. */
static int snap_write_file(const char *tmp, struct v2_store *s, const struct mu_buf *rdzv,
                           uint64_t next_seq, struct mu_buf *b, uint64_t *bytes)
{
  struct snap_writer w = {-1, *b, 0, 0};
  *bytes = 0;
  w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (w.fd < 0) {
    w.rc = -errno;
  } else {
    snap_write(s, rdzv, next_seq, &w);
    off_t end = lseek(w.fd, 0, SEEK_END);
    *bytes = end > 0 ? (uint64_t)end : 0;
    if (close(w.fd) != 0 && w.rc == 0)
      w.rc = -errno;
  }
  *b = w.b;
  return w.rc;
}

/* Deletes the snapshots older than the one at `snap_index` and the segments it covers (all
 * before segment `next_seq`). */
static void remove_older(struct persist *p, uint64_t snap_index, uint64_t next_seq)
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
    if (persist_seg_covered(&l.wals[i], snap_index, next_seq)) {
      char *path = persist_wal_path(p->dir, l.wals[i].seq, l.wals[i].first);
      unlink(path);
      mu_free(path);
    }
  }
  persist_listing_release(&l);
}

/* snap.tmp holds the snapshot at `index` that covers the segments before `next_seq`, fsync()ed:
 * names it (replacing an older snapshot at the same index: rename() is atomic), makes the name
 * durable, then deletes what it covers (older snapshots, the segments before `next_seq`: the
 * last batch musterd may still be writing to the old one is in the snapshot already). The
 * compactor does it for a background snapshot, so that the loop waits for none of these disk
 * operations. Returns: 0, or -errno (snap.tmp is removed: it holds space a full disk needs). */
static int snap_install(struct persist *p, uint64_t index, uint64_t next_seq)
{
  char *tmp = mu_asprintf("%s/snap.tmp", p->dir);
  char *final = persist_snap_path(p->dir, index);
  int rc = rename(tmp, final) == 0 ? 0 : -errno;
  if (rc == 0)
    rc = persist_sync_dir(p->dir); /* the snapshot is durable before any log is dropped */
  if (rc == 0)
    remove_older(p, index, next_seq);
  else
    unlink(tmp);
  mu_free(tmp);
  mu_free(final);
  return rc;
}

/* Opens the empty log segment `seq` whose first index is `first`, its first space reserved
 * (*reserved bytes; 0 where the file system cannot) and, with `sync`, its name durable (else
 * the log makes it durable before its first record: seg_dir_unsynced). Returns: the fd, or
 * -errno. */
static int open_segment(struct persist *p, uint64_t seq, uint64_t first, int64_t *reserved,
                        int sync)
{
  char *seg = persist_wal_path(p->dir, seq, first);
  int fd = open(seg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int rc = fd >= 0 ? 0 : -errno;
  *reserved = 0;
  if (rc == 0 && !p->no_reserve) {
    rc = persist_reserve(fd, 0, PERSIST_RESERVE_CHUNK);
    if (rc == 0)
      *reserved = PERSIST_RESERVE_CHUNK;
    else if (rc == -EOPNOTSUPP || rc == -ENOSPC)
      rc = 0; /* a full disk: the log reserves later (compaction is what frees it) */
  }
  if (rc == 0 && sync)
    rc = persist_sync_dir(p->dir);
  if (rc != 0 && fd >= 0) {
    close(fd);
    unlink(seg);
  }
  mu_free(seg);
  return rc != 0 ? rc : fd;
}

/* The rendezvous state as the record a snapshot carries, into `out` (left empty without /v1).
 * Returns: 0, or an encoding error. */
static int snap_rdzv(struct persist *p, struct mu_buf *out)
{
  if (p->rdzv == NULL)
    return 0;
  return persist_put_rdzv(p, out) != 0 ? -E2BIG : 0;
}

int persist_snapshot(struct persist *p)
{
  struct v2_store *s = p->s;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED), rd = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  char *tmp = mu_asprintf("%s/snap.tmp", p->dir);
  uint64_t bytes = 0, seq = p->seg_seq + 1;
  int64_t reserved = 0;
  int nfd = -1;
  persist_snapshot_cancel(p);
  (void)persist_wait_idle(p); /* a batch that failed is covered: the snapshot holds every record */
  /* the current segment's reserve and zeros go first: on a full disk they are the room the
   * snapshot needs (the log reserves again at its next record) */
  persist_release(p->fd, p->written_to, persist_reach(p));
  p->reserved_to = p->written_to;
  if (p->zero_fd == p->fd)
    p->zero_to = p->written_to;
  int rc = snap_rdzv(p, &rd);
  if (rc == 0)
    rc = snap_write_file(tmp, s, &rd, seq, &b, &bytes);
  if (rc == 0) { /* the segment after it exists before the snapshot does */
    nfd = open_segment(p, seq, s->index + 1, &reserved, 1);
    rc = nfd < 0 ? nfd : 0;
  }
  if (rc != 0) {
    unlink(tmp);
    goto out;
  }
  rc = snap_install(p, s->index, seq);
  if (rc != 0) {
    char *seg = persist_wal_path(p->dir, seq, s->index + 1);
    close(nfd);
    unlink(seg); /* empty: were it left, recovery would read it as the next segment */
    mu_free(seg);
    goto out;
  }
  p->m_snapshots++;
  p->m_snap_loop++;
  /* The snapshot covers every record appended so far, synced or not, and every segment
   * before the new one (the current one is deleted already). */
  persist_switch_segment(p, nfd, seq, s->index + 1, 1, reserved);
  mu_buf_clear(&p->pending);
  p->inflight_failed = 0; /* its records are in the snapshot, its segment deleted */
  p->synced = p->appended;
  p->since_snap = 0;
  p->since_bytes = 0;
  p->snap_file_bytes = bytes;
  persist_notify_durable(p);
out:
  mu_buf_release(&b);
  mu_buf_release(&rd);
  mu_free(tmp);
  return rc;
}

/* The compactor's work: loads the newest snapshot and the closed segments (those before
 * segment snap_seq, the loop's) into a store and a rendezvous of its own, with recovery's code,
 * writes the snapshot of that state at snap_index and installs it. Reads p->dir, p->rdzv (NULL
 * or not), p->snap_index and p->snap_seq only: the loop changes none of them while it runs.
 * Returns: 0 with *bytes the snapshot's size, or -errno. */
static int compact(struct persist *p, uint64_t *bytes)
{
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0)
    return -ENOMEM;
  struct persist *c = mu_calloc(1, sizeof(*c));
  struct persist_listing l = {NULL, NULL, 0, 0};
  struct persist_report rep;
  struct mu_buf err = MU_BUF_INIT(4096), b = MU_BUF_INIT(MU_BUF_UNBOUNDED),
                rd = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  char *tmp = mu_asprintf("%s/snap.tmp", p->dir);
  int rc = 0;
  memset(&rep, 0, sizeof(rep));
  mu_buf_init(&rep.snapshot, MU_BUF_UNBOUNDED);
  mu_buf_init(&rep.warning, MU_BUF_UNBOUNDED);
  c->dir = p->dir;
  c->lock_fd = -1;
  c->fd = -1;
  c->s = v2_store_new(&loop);
  c->rdzv = p->rdzv != NULL ? rdzv_new(&loop, 0) : NULL;
  rc = persist_list_dir(p->dir, &l) != 0 ? -errno : 0;
  if (rc != 0)
    goto out;
  while (l.nwals > 0 && l.wals[l.nwals - 1].seq >= p->snap_seq)
    l.nwals--; /* the segment the loop appends to now */
  if (persist_load(c, &l, 0, &rep, &err) != 0 || c->s->index != p->snap_index) {
    rc = -EIO; /* damaged, or short of the index: the old segment's last batch is durable */
    goto out;
  }
  rc = snap_rdzv(c, &rd);
  rdzv_free(c->rdzv, NULL, NULL); /* encoded: its memory goes before the snapshot is written */
  c->rdzv = NULL;
  if (rc == 0)
    rc = snap_write_file(tmp, c->s, &rd, p->snap_seq, &b, bytes);
  uv_mutex_lock(&p->mu);
  if (rc == 0 && p->snap_cancel)
    rc = -ECANCELED;
  uv_mutex_unlock(&p->mu);
  if (rc != 0)
    unlink(tmp); /* its space may be what the log needs */
  else
    rc = snap_install(c, p->snap_index, p->snap_seq);
out:
  persist_listing_release(&l);
  persist_report_release(&rep);
  mu_buf_release(&err);
  mu_buf_release(&b);
  mu_buf_release(&rd);
  mu_free(c->rdzv_blob);
  v2_store_free(c->s);
  rdzv_free(c->rdzv, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT); /* the close callbacks free their memory */
  uv_loop_close(&loop);
  mu_free(c);
  mu_free(tmp);
  return rc;
}

static void compactor(void *arg)
{
  struct persist *p = arg;
  uint64_t bytes = 0;
  int rc = compact(p, &bytes);
  uv_mutex_lock(&p->mu);
  p->snap_done = 1;
  p->snap_rc = rc;
  p->snap_out_bytes = bytes;
  uv_mutex_unlock(&p->mu);
  uv_async_send(&p->async);
}

/* The compactor ended (joined) with `rc`: takes its result. */
static void snap_finish(struct persist *p, int rc)
{
  p->snap_state = SNAP_NONE;
  p->m_snap_ms = (double)(uv_hrtime() - p->snap_t0) / 1e6;
  if (rc == 0) {
    p->m_snapshots++;
    p->snap_backoff_ms = 0;
    uv_mutex_lock(&p->mu);
    p->snap_file_bytes = p->snap_out_bytes;
    uv_mutex_unlock(&p->mu);
    return;
  }
  p->since_snap += p->snap_records;
  p->since_bytes += p->snap_bytes;
  if (rc != -ECANCELED)
    persist_snapshot_failed(p, rc);
}

int persist_snapshot_running(const struct persist *p)
{
  return p->snap_state != SNAP_NONE;
}

void persist_snapshot_join(struct persist *p)
{
  if (p->snap_joinable)
    uv_thread_join(&p->snap_thread);
  p->snap_joinable = 0;
}

void persist_snapshot_poll(struct persist *p)
{
  if (p->snap_state == SNAP_WAITING && p->snap_old_fd < 0) {
    persist_snapshot_join(p);
    p->snap_cancel = 0;
    p->snap_done = 0;
    if (uv_thread_create(&p->snap_thread, compactor, p) != 0) {
      p->snap_state = SNAP_NONE;
      p->since_snap += p->snap_records;
      p->since_bytes += p->snap_bytes;
      persist_snapshot_failed(p, -EAGAIN);
      return;
    }
    p->snap_state = SNAP_RUNNING;
    return;
  }
  if (p->snap_state != SNAP_RUNNING)
    return;
  uv_mutex_lock(&p->mu);
  int done = p->snap_done, rc = p->snap_rc;
  uv_mutex_unlock(&p->mu);
  if (done) {
    p->snap_joinable = 1; /* joined later: its exit (the allocator's teardown) takes ~10 ms */
    snap_finish(p, rc);
  }
}

void persist_snapshot_cancel(struct persist *p)
{
  persist_snapshot_join(p);
  if (p->snap_state == SNAP_WAITING) {
    p->snap_state = SNAP_NONE;
    p->since_snap += p->snap_records;
    p->since_bytes += p->snap_bytes;
  } else if (p->snap_state == SNAP_RUNNING) {
    uv_mutex_lock(&p->mu);
    p->snap_cancel = 1;
    uv_mutex_unlock(&p->mu);
    uv_thread_join(&p->snap_thread); /* the result is set before the thread ends */
    snap_finish(p, p->snap_rc);
  }
}

int persist_snapshot_start(struct persist *p)
{
  struct v2_store *s = p->s;
  uint64_t t0 = uv_hrtime(), seq = p->seg_seq + 1;
  int64_t reserved;
  int nfd = open_segment(p, seq, s->index + 1, &reserved, 0);
  if (nfd < 0)
    return nfd;
  persist_seal_segment(p); /* the records so far go to the old segment */
  p->snap_old_end = p->written_to;
  p->snap_old_resv = persist_reach(p);
  p->snap_state = SNAP_WAITING;
  p->snap_t0 = t0;
  p->snap_index = s->index;
  p->snap_seq = seq;
  p->snap_records = p->since_snap;
  p->since_snap = 0;
  p->snap_bytes = p->since_bytes;
  p->since_bytes = 0;
  p->snap_old_last = p->appended;
  p->snap_old_fd = persist_switch_segment(p, nfd, seq, s->index + 1, 0, reserved);
  p->seg_dir_unsynced = p->mode != PERSIST_FSYNC_OFF; /* off: only a machine crash loses it */
  persist_close_old_segment(p); /* and starts the compactor once it is closed */
  p->m_start_ms = (double)(uv_hrtime() - t0) / 1e6;
  return 0;
}
