/* The log writer: appending records from the store's commit hook and the rendezvous' change
 * hook, the group-commit thread of batch mode, the server's durability barrier (no output
 * reveals a record before it is durable), and the module's stop, close and free (see persist.h). */
#define _GNU_SOURCE /* fallocate(), FALLOC_FL_KEEP_SIZE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
#include "wal.h"

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

/* ---------------------------------------------------------------------------------------------
 * Disk errors
 *
 * etcd panics when its log cannot be written. musterd keeps serving reads instead: a record that
 * could not be written (or synced) stays in memory, the file is cut back to the end of the last
 * whole write (after a failed fdatasync() the kernel may have dropped the pages: only writing
 * them again, then a successful sync, proves them durable), and a timer writes it again. Until
 * that works every write is refused before it is applied (rv_barrier.read_only: an etcd-shaped
 * error, 5xx), and nothing that reveals the record is sent (the barrier holds it): what was not
 * kept is never acknowledged. A write that works again turns musterd writable by itself.
 */

#define RETRY_MS 250 /* how often records that could not be written are tried again */

/* A full disk is found before a write is applied, so that reads go on: the log segment's space
 * is reserved ahead (fallocate(), keeping the file's size: the reader never sees the reserve),
 * PERSIST_RESERVE_CHUNK at a time, when less than RESERVE_LOW is left. When it cannot grow,
 * writes are refused (the records that still come, a TTL expiry, a lease, fit in what is left)
 * and the retry timer tries again. A record bigger than what is left can still meet ENOSPC in
 * write(): then it is the write-error path above. */
#define RESERVE_LOW ((int64_t)4 << 20)

static void on_retry(uv_timer_t *t);
static void kick(struct persist *p);

static void read_only_msg(struct persist *p, int err)
{
  snprintf(p->ro_msg, sizeof(p->ro_msg),
           "musterd is read-only: writing its data dir failed (%s); free space or fix the disk "
           "and writes resume by themselves",
           strerror(-err));
}

static void disk_failed(struct persist *p, const char *what, int err)
{
  p->m_disk_errors++;
  if (p->disk_err == 0) {
    p->ro_since = uv_now(p->loop);
    mu_log(MU_LOG_ERROR,
           "data dir '%s': %s failed: %s; refusing writes (reads go on) until the records not "
           "yet durable can be written, tried again every %d ms (free space or fix the disk)",
           p->dir, what, strerror(-err), RETRY_MS);
  }
  p->disk_err = err;
  p->reserved_to = 0; /* cutting the file back freed the reserve past its end */
  read_only_msg(p, err);
  if (p->handles_open == PERSIST_HANDLES && !p->handles_closing)
    uv_timer_start(&p->retry, on_retry, RETRY_MS, 0);
}

int persist_reserve(int fd, int64_t off, int64_t len)
{
  int rc;
  do
    rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
  while (rc != 0 && errno == EINTR);
  if (rc == 0)
    return 0;
  return errno == EOPNOTSUPP || errno == ENOSYS ? -EOPNOTSUPP : -errno;
}

void persist_release(int fd, int64_t from, int64_t to)
{
  if (fd < 0 || to <= from)
    return;
  int rc;
  do
    rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(to - from));
  while (rc != 0 && errno == EINTR);
}

int64_t persist_reach(const struct persist *p)
{
  /* zeros are written ahead inside the reserve only (append_batch's zero_limit) */
  return p->reserved_to > p->written_to ? p->reserved_to : p->written_to;
}

/* Grows the segment's reserve when little is left. Returns: 0, or -errno when it could not
 * (musterd is then read-only until it can). */
static int reserve_more(struct persist *p)
{
  if (p->no_reserve || p->reserved_to - p->seg_bytes >= RESERVE_LOW)
    return 0;
  int rc = persist_reserve(p->fd, p->seg_bytes, PERSIST_RESERVE_CHUNK);
  if (rc == -EOPNOTSUPP) {
    p->no_reserve = 1;
    return 0;
  }
  if (rc == 0) {
    p->reserved_to = p->seg_bytes + PERSIST_RESERVE_CHUNK;
    if (p->nospace) {
      mu_log(MU_LOG_WARN, "data dir '%s': space is back after %.1f s; accepting writes", p->dir,
             (double)(uv_now(p->loop) - p->ro_since) / 1000.0);
      p->nospace = 0;
    }
    return 0;
  }
  if (!p->nospace)
    p->m_disk_errors++;
  if (!p->nospace && p->disk_err == 0) {
    p->ro_since = uv_now(p->loop);
    mu_log(MU_LOG_ERROR,
           "data dir '%s': reserving space for the log failed: %s; refusing writes (reads go "
           "on) until it works, tried again every %d ms (free space on its disk)",
           p->dir, strerror(-rc), RETRY_MS);
  }
  p->nospace = rc;
  if (p->disk_err == 0)
    read_only_msg(p, rc);
  if (p->handles_open == PERSIST_HANDLES && !p->handles_closing)
    uv_timer_start(&p->retry, on_retry, RETRY_MS, 0);
  return rc;
}

static void disk_ok(struct persist *p)
{
  if (p->disk_err == 0)
    return;
  mu_log(MU_LOG_WARN, "data dir '%s': writing works again after %.1f s; accepting writes", p->dir,
         (double)(uv_now(p->loop) - p->ro_since) / 1000.0);
  p->disk_err = 0;
}

#define ZERO_CHUNK ((int64_t)1 << 20) /* zeros written ahead at a time */
#define ZERO_LOW ((int64_t)256 << 10) /* ... when fewer are left past the records */

static int pwrite_all(int fd, const void *data, size_t n, int64_t off)
{
  const char *q = data;
  while (n > 0) {
    ssize_t w = pwrite(fd, q, n, (off_t)off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -errno;
    if (w == 0)
      return -EIO;
    q += w;
    n -= (size_t)w;
    off += w;
  }
  return 0;
}

/* Writes zeros to `fd` from `from` to `to`. Returns: 0, or -errno. */
static int write_zeros(int fd, int64_t from, int64_t to)
{
  static const char zeros[64 << 10];
  while (from < to) {
    size_t n = to - from < (int64_t)sizeof(zeros) ? (size_t)(to - from) : sizeof(zeros);
    int rc = pwrite_all(fd, zeros, n, from);
    if (rc != 0)
      return rc;
    from += (int64_t)n;
  }
  return 0;
}

/* Writes `n` bytes to segment `fd` at offset `off` and, with `sync`, fdatasync()s them. With
 * `zero_limit` > 0 (and `sync`), when few zeros are left past them, ZERO_CHUNK more are written
 * (up to zero_limit, inside the reserve: no ENOSPC) and synced with them, so that the next
 * syncs need not grow the file (p->zero_fd, p->zero_to). On failure the file is cut back to
 * `off` (best effort: the bytes there may not be durable; they are written again, at `off`).
 * Returns: 0, or -errno. Runs on the sync thread while busy, else on the loop. */
static int append_batch(struct persist *p, int fd, const char *data, size_t n, int sync,
                        int64_t off, int64_t zero_limit)
{
  int64_t end = off + (int64_t)n;
  if (p->zero_fd != fd) {
    p->zero_fd = fd; /* a segment's first write here: its size is its last record's end */
    p->zero_to = end;
  }
  int rc = pwrite_all(fd, data, n, off);
  if (rc == 0 && sync && zero_limit > 0 && p->zero_to < end + ZERO_LOW) {
    int64_t from = p->zero_to > end ? p->zero_to : end;
    int64_t to = from + ZERO_CHUNK < zero_limit ? from + ZERO_CHUNK : zero_limit;
    if (to > from) {
      if (write_zeros(fd, from, to) == 0)
        p->zero_to = to;
      else /* only a speed-up: the records are what count */
        (void)!ftruncate(fd, (off_t)from);
    }
  }
  if (end > p->zero_to)
    p->zero_to = end;
  if (rc == 0 && sync && fdatasync(fd) != 0)
    rc = -errno;
  if (rc != 0) {
    (void)!ftruncate(fd, (off_t)off); /* best effort now; written again at `off` */
    p->zero_to = off;
    return rc;
  }
  return 0;
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

/* Writes are refused while a disk error holds records back. */
static const char *barrier_read_only(void *data)
{
  struct persist *p = data;
  if ((p->disk_err == 0 && p->nospace == 0) || p->stopped)
    return NULL;
  p->m_refused++;
  return p->ro_msg;
}

/* Whether store paths `a` (n bytes) and `b` are the same, or one lies under the other. */
static int paths_related(const char *a, size_t n, const char *b)
{
  size_t m = strlen(b);
  const char *lo = n <= m ? a : b, *hi = n <= m ? b : a;
  size_t l = n <= m ? n : m, h = n <= m ? m : n;
  if (memcmp(lo, hi, l) != 0)
    return 0;
  return l == h || hi[l] == '/' || (l > 0 && lo[l - 1] == '/');
}

/* Looks at the held records in `b`: returns 1 when one of them touches `key`, else 0 with
 * *first the lowest store index among them (unchanged when none). */
static int held_touch(const struct mu_buf *b, const char *key, uint64_t *first)
{
  struct wal_reader r;
  wal_reader_init(&r, b->data, b->len);
  const unsigned char *pl;
  size_t len;
  while (wal_read(&r, &pl, &len) == WAL_RECORD) {
    struct wal_rec rec;
    if (wal_rec_decode(pl, len, &rec) != 0)
      return 1; /* cannot tell: the read waits */
    if (rec.type != WAL_REC_EVENT)
      continue; /* rendezvous changes: not in the v2 store */
    if (paths_related(rec.key, rec.key_len, key))
      return 1;
    if (rec.index < *first)
      *first = rec.index;
  }
  return 0;
}

/* Reads go on during a disk error: a read that no held record touches is answered at once, at
 * the last durable store index (the held records come after it, in index order), and reveals
 * nothing that may be lost; one they touch waits for them, as every output does otherwise. */
static uint64_t barrier_read_index(void *data, const char *key)
{
  struct persist *p = data;
  if (p->disk_err == 0 || p->stopped || p->synced >= p->appended || key == NULL)
    return 0;
  uint64_t first = UINT64_MAX;
  if ((p->inflight_failed && held_touch(&p->inflight, key, &first)) ||
      held_touch(&p->pending, key, &first))
    return 0;
  return first == UINT64_MAX ? p->s->index : first - 1;
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
    int fd = p->inflight_fd;
    uv_mutex_unlock(&p->mu);
    /* the loop leaves inflight, its cut and its flags alone while busy */
    uint64_t t0 = uv_hrtime();
    int rc = p->inflight_syncdir ? persist_sync_dir(p->dir) : 0;
    if (rc == 0) {
      p->inflight_syncdir = 0;
      rc = append_batch(p, fd, p->inflight.data, p->inflight.len, 1, p->inflight_off,
                        p->inflight_zero_limit);
    }
    uint64_t t1 = uv_hrtime();
    uv_mutex_lock(&p->mu);
    p->m_sync_ns += t1 - t0;
    p->thread_err = rc;
    if (rc == 0)
      p->thread_done = p->inflight_last;
    p->busy = 0;
    uv_cond_broadcast(&p->cond);
    uv_async_send(&p->async);
  }
  uv_mutex_unlock(&p->mu);
}

/* Hands inflight to the thread. */
static void go_batch(struct persist *p)
{
  uv_mutex_lock(&p->mu);
  p->busy = 1;
  uv_cond_broadcast(&p->cond);
  uv_mutex_unlock(&p->mu);
}

/* Hands the pending records to the thread, with zeros written ahead unless `last` (the last
 * batch of a segment about to be closed). Loop thread, with the thread idle and no failed batch
 * to write again. */
static void start_batch(struct persist *p, int last)
{
  struct mu_buf t = p->inflight;
  p->inflight = p->pending;
  p->pending = t;
  mu_buf_clear(&p->pending);
  p->inflight_last = p->appended;
  p->batch_first = p->appended;
  if (p->hold_since != 0)
    p->m_hold_ns += uv_hrtime() - p->hold_since;
  p->hold_since = 0;
  p->inflight_fd = p->fd;
  p->inflight_off = p->written_to;
  p->written_to += (int64_t)p->inflight.len;
  p->inflight_zero_limit = last || p->no_reserve ? 0 : p->reserved_to;
  p->inflight_syncdir = p->seg_dir_unsynced;
  p->seg_dir_unsynced = 0;
  if (p->inflight.len > p->m_max_batch)
    p->m_max_batch = p->inflight.len;
  p->m_bytes += p->inflight.len;
  p->m_syncs++;
  go_batch(p);
}

/* Waits for the thread's batch to end, without taking its result. */
static void wait_thread(struct persist *p)
{
  if (!p->thread_started)
    return;
  uv_mutex_lock(&p->mu);
  while (p->busy)
    uv_cond_wait(&p->cond, &p->mu);
  uv_mutex_unlock(&p->mu);
}

/* Takes the result of the thread's last batch (it is idle): advances `synced`, or keeps the
 * batch to write again. Returns: 0, or its error. */
static int collect(struct persist *p)
{
  uv_mutex_lock(&p->mu);
  int err = p->thread_err;
  p->thread_err = 0;
  if (p->thread_done > p->synced)
    p->synced = p->thread_done;
  uv_mutex_unlock(&p->mu);
  if (err != 0)
    p->inflight_failed = 1;
  else if (p->inflight_failed && p->synced >= p->inflight_last)
    p->inflight_failed = 0;
  return err;
}

int persist_wait_idle(struct persist *p)
{
  wait_thread(p);
  return p->thread_started ? collect(p) : 0;
}

static int thread_busy(struct persist *p)
{
  if (!p->thread_started)
    return 0;
  uv_mutex_lock(&p->mu);
  int b = p->busy;
  uv_mutex_unlock(&p->mu);
  return b;
}

int persist_flush_sync(struct persist *p)
{
  int rc = persist_wait_idle(p);
  if (p->inflight_failed) { /* the failed batch first, to its own segment */
    rc = p->inflight_syncdir ? persist_sync_dir(p->dir) : 0;
    if (rc != 0)
      return rc;
    p->inflight_syncdir = 0;
    rc = append_batch(p, p->inflight_fd, p->inflight.data, p->inflight.len, 1, p->inflight_off, 0);
    if (rc != 0)
      return rc;
    p->inflight_failed = 0;
    p->synced = p->inflight_last;
  }
  if (rc == 0 && p->seg_dir_unsynced) {
    rc = persist_sync_dir(p->dir);
    if (rc == 0)
      p->seg_dir_unsynced = 0;
  }
  if (rc == 0)
    rc = append_batch(p, p->fd, p->pending.data, p->pending.len, 1, p->written_to, 0);
  if (rc == 0) {
    p->written_to += (int64_t)p->pending.len;
    p->m_bytes += p->pending.len;
    p->m_syncs++;
    mu_buf_clear(&p->pending);
    p->synced = p->appended;
  }
  return rc;
}

void persist_seal_segment(struct persist *p)
{
  if (p->mode == PERSIST_FSYNC_BATCH && p->pending.len > 0 && !p->inflight_failed)
    start_batch(p, 1);
}

int persist_switch_segment(struct persist *p, int fd, uint64_t seq, uint64_t first, int close_old,
                           int64_t reserved)
{
  int old = p->fd;
  p->fd = fd;
  p->seg_seq = seq;
  p->seg_first = first;
  p->written_to = 0;
  p->seg_bytes = 0;
  p->reserved_to = reserved;
  p->seg_dir_unsynced = 0;
  if (close_old) {
    close(old);
    return -1;
  }
  return old;
}

int persist_segment_done(struct persist *p, uint64_t last)
{
  return p->synced >= last && !(p->inflight_failed && p->inflight_last <= last);
}

static void on_snap_timer(uv_timer_t *t)
{
  persist_maybe_work(t->data);
}

void persist_snapshot_failed(struct persist *p, int err)
{
  p->m_snap_failures++;
  p->snap_backoff_ms = p->snap_backoff_ms == 0 ? 1000 : p->snap_backoff_ms * 2;
  if (p->snap_backoff_ms > 60000)
    p->snap_backoff_ms = 60000;
  p->snap_retry_at = uv_now(p->loop) + p->snap_backoff_ms;
  if (p->handles_open == PERSIST_HANDLES && !p->handles_closing)
    uv_timer_start(&p->snap_timer, on_snap_timer, p->snap_backoff_ms, 0);
  mu_log(MU_LOG_WARN,
         "data dir '%s': writing a snapshot failed: %s; the log keeps every write meanwhile, "
         "trying again in %llu s",
         p->dir, strerror(-err), (unsigned long long)(p->snap_backoff_ms / 1000));
}

/* Writes what a disk error held back, from the loop (always, off) or through the thread (batch).
 * Returns: 0 when it is written (or handed to the thread), else -errno. */
static int write_held(struct persist *p)
{
  if (p->mode == PERSIST_FSYNC_BATCH) {
    if (thread_busy(p))
      return 0;
    if (p->inflight_failed)
      go_batch(p); /* the same bytes to the same segment; on_async says how it went */
    else if (p->pending.len > 0)
      start_batch(p, 0);
    return 0;
  }
  if (p->seg_dir_unsynced) { /* always: a new segment's name, before its first record */
    int rc = persist_sync_dir(p->dir);
    if (rc != 0)
      return rc;
    p->seg_dir_unsynced = 0;
  }
  int rc = append_batch(p, p->fd, p->pending.data, p->pending.len, p->mode == PERSIST_FSYNC_ALWAYS,
                        p->written_to,
                        p->mode == PERSIST_FSYNC_ALWAYS && !p->no_reserve ? p->reserved_to : 0);
  if (rc != 0)
    return rc;
  p->m_bytes += p->pending.len;
  if (p->mode == PERSIST_FSYNC_ALWAYS)
    p->m_syncs++;
  p->written_to += (int64_t)p->pending.len;
  mu_buf_clear(&p->pending);
  p->synced = p->appended;
  disk_ok(p);
  return 0;
}

static void on_retry(uv_timer_t *t)
{
  struct persist *p = t->data;
  if (p->stopped)
    return;
  persist_maybe_work(p); /* a snapshot that compacts a full disk */
  if (p->nospace != 0 && p->disk_err == 0) {
    reserve_more(p); /* re-arms the timer when it still cannot */
    return;
  }
  if (p->disk_err == 0)
    return;
  int rc = write_held(p);
  if (rc != 0)
    disk_failed(p, "writing the log again", rc);
  persist_notify_durable(p);
}

void persist_close_old_segment(struct persist *p)
{
  if (p->snap_old_fd >= 0 && persist_segment_done(p, p->snap_old_last)) {
    persist_release(p->snap_old_fd, p->snap_old_end, p->snap_old_resv);
    close(p->snap_old_fd);
    p->snap_old_fd = -1;
  }
  persist_snapshot_poll(p);
}

/* Group commit. The clients a batch's fsync released answer with their next writes one round
 * trip later, while the next fsync would already run without them: batches would settle at
 * about half the writers. So the next batch waits, the loop polling without blocking, until
 * about as many records are pending as were in flight when the last batch ended, or
 * HOLD_MAX_NS (1 ms) passed. A lone writer never waits (its record is all there is). Replies are
 * only ever released by the fsync that covers them: the wait changes when, never whether. */
#define HOLD_MAX_NS ((uint64_t)1000 * 1000)

static int hold_batch(struct persist *p)
{
  uint64_t pending = p->appended - p->batch_first;
  if (p->writers <= 1 || pending * 8 >= p->writers * 7 || p->stopped)
    return 0;
  uint64_t now = uv_hrtime();
  if (p->hold_since == 0)
    p->hold_since = now;
  if (now - p->hold_since >= HOLD_MAX_NS)
    return 0;
  kick(p); /* look again in the next loop iteration */
  return 1;
}

/* Returns: 1 when the log since the last snapshot calls for the next one: snapshot_every
 * records, or more bytes than max(snapshot_bytes, 2 x the last snapshot's size) (so that
 * large values do not grow the log by GBs before the count is reached, while a snapshot costs
 * at most half the log written since the previous one: the disk holds at most about 3 x the
 * state). */
static int snapshot_due(const struct persist *p)
{
  if (p->snapshot_every > 0 && p->since_snap >= p->snapshot_every)
    return 1;
  uint64_t limit = p->snapshot_bytes;
  if (limit > 0 && p->snap_file_bytes > limit / 2)
    limit = p->snap_file_bytes * 2;
  return limit > 0 && p->since_bytes > limit;
}

/* Read-only mode's way out is compaction: when the disk is full (the log's reserve cannot grow,
 * or a write met ENOSPC) and the log since the last snapshot holds at least COMPACT_MIN_BYTES, a
 * snapshot is taken: when the log holds less live state than its size (values overwritten or
 * deleted since), the snapshot fits, the old segments go, and the reserve (then writes) comes
 * back by itself. A snapshot that does not fit fails, is removed, and is tried again on its
 * timer; one that frees nothing leaves no log to compact (since_bytes is 0) until writes come. */
#define COMPACT_MIN_BYTES ((uint64_t)1 << 20)

static int compaction_due(const struct persist *p)
{
  return (p->nospace != 0 || p->disk_err == -ENOSPC) && p->since_bytes >= COMPACT_MIN_BYTES;
}

/* The disk is full and records are held in memory (a write met ENOSPC): the compactor cannot
 * see them, so the snapshot is written on the loop from the state in memory, which holds them;
 * once it is installed they are durable (covered by it) and the log goes on in a new segment. */
static void compact_held(struct persist *p)
{
  mu_log(MU_LOG_WARN,
         "data dir '%s': the disk is full with %llu bytes of log since the last snapshot; "
         "compacting it (a snapshot of the state in memory)",
         p->dir, (unsigned long long)p->since_bytes);
  int rc = persist_snapshot(p);
  if (rc != 0) {
    persist_snapshot_failed(p, rc);
    return;
  }
  disk_ok(p);
  persist_notify_durable(p);
}

void persist_maybe_work(struct persist *p)
{
  if (p->stopped)
    return;
  int compact = compaction_due(p), may = uv_now(p->loop) >= p->snap_retry_at;
  if (p->disk_err != 0) {
    if (compact && may)
      compact_held(p);
    return;
  }
  if (((snapshot_due(p) && p->nospace == 0) || compact) && !thread_busy(p) &&
      p->snap_state == SNAP_NONE && p->snap_old_fd < 0 && may) {
    if (compact)
      mu_log(MU_LOG_WARN,
             "data dir '%s': the disk is full with %llu bytes of log since the last snapshot; "
             "compacting it",
             p->dir, (unsigned long long)p->since_bytes);
    int rc = persist_snapshot_start(p);
    if (rc != 0)
      persist_snapshot_failed(p, rc);
  }
  if (p->mode == PERSIST_FSYNC_BATCH && p->pending.len > 0 && !thread_busy(p) &&
      !p->inflight_failed && !hold_batch(p))
    start_batch(p, 0);
}

static void on_async(uv_async_t *a)
{
  struct persist *p = a->data;
  if (thread_busy(p))
    return;
  p->writers = p->appended - p->synced; /* before collect(): the batch just written, and the
                                         * records that arrived while it was */
  int err = collect(p);
  if (err != 0)
    disk_failed(p, "writing the log", err);
  else if (!p->inflight_failed && p->disk_err != 0)
    disk_ok(p);
  persist_close_old_segment(p);
  persist_maybe_work(p);
  persist_notify_durable(p);
}

/* Runs once after the callbacks of this loop iteration appended their records (an active idle
 * handle also keeps the next poll from blocking, so records appended from a timer are not left
 * waiting for the next I/O event). */
static void on_kick(uv_idle_t *h)
{
  uv_idle_stop(h);
  persist_maybe_work(h->data);
  persist_notify_durable(h->data); /* always, off: the records just written */
}

static void kick(struct persist *p)
{
  if (p->handles_open == PERSIST_HANDLES && !p->handles_closing &&
      !uv_is_active((uv_handle_t *)&p->kick))
    uv_idle_start(&p->kick, on_kick);
}

/* ---------------------------------------------------------------------------------------------
 * Appending
 */

/* A record was just appended to `pending` from offset `before`: count it, and write (and sync)
 * it now unless the batch thread or the retry after a disk error will. */
static void appended(struct persist *p, size_t before)
{
  p->appended++;
  p->since_snap++;
  p->since_bytes += p->pending.len - before;
  p->seg_bytes += (int64_t)(p->pending.len - before);
  reserve_more(p);
  if (p->mode == PERSIST_FSYNC_BATCH || snapshot_due(p))
    kick(p);
  if (p->mode == PERSIST_FSYNC_BATCH || p->disk_err != 0)
    return; /* the thread, or the retry, writes it */
  int rc = write_held(p);
  if (rc != 0)
    disk_failed(p, "writing the log", rc);
}

/* A record that cannot be encoded can never be written: as etcd does, stop (the log is
 * consistent up to the last sync). */
static void fatal_encode(struct persist *p, const char *what)
{
  mu_log(MU_LOG_ERROR,
         "data dir '%s': %s failed; stopping so that no write is acknowledged "
         "without being durable",
         p->dir, what);
  exit(1);
}

void persist_on_commit(void *data, const struct v2_event *e)
{
  struct persist *p = data;
  if (p->stopped)
    return;
  size_t before = p->pending.len;
  if (persist_encode_event(&p->pending, p->s, e) != 0)
    fatal_encode(p, "encoding a log record (over 256 MiB)");
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
    fatal_encode(p, "encoding a rendezvous change (over 256 MiB)");
  appended(p, before);
}

int persist_start(struct persist *p, struct mu_buf *err)
{
  p->snap_old_fd = -1;
  p->inflight_fd = -1;
  /* seg_bytes and written_to: start_logging() set them, and the expiries it logged moved them
   * (not the file's size: with --fsync always they were written with zeros ahead of them) */
  p->reserved_to = p->seg_bytes; /* reserved at the first append */
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
  uv_timer_init(p->loop, &p->retry);
  p->retry.data = p;
  uv_timer_init(p->loop, &p->snap_timer);
  p->snap_timer.data = p;
  uv_unref((uv_handle_t *)&p->kick);
  uv_unref((uv_handle_t *)&p->async);
  uv_unref((uv_handle_t *)&p->retry);
  uv_unref((uv_handle_t *)&p->snap_timer);
  p->handles_open = PERSIST_HANDLES;
  /* a full disk is found now, not at the first write (which it would refuse after the fact):
   * read-only from the start, and compacting when the log allows */
  reserve_more(p);
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
  persist_snapshot_cancel(p);
  if (p->since_snap > 0 && p->disk_err == 0)
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
  persist_snapshot_cancel(p);
  stop_logging(p);
  if (p->handles_open == PERSIST_HANDLES && !p->handles_closing) {
    p->handles_closing = 1;
    if (p->srv != NULL)
      for (int i = 0; i < PERSIST_HANDLES; i++)
        rv_server_ref(p->srv);
    uv_close((uv_handle_t *)&p->kick, handle_closed);
    uv_close((uv_handle_t *)&p->async, handle_closed);
    uv_close((uv_handle_t *)&p->retry, handle_closed);
    uv_close((uv_handle_t *)&p->snap_timer, handle_closed);
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
  uint64_t sync_ns = 0;
  if (p->thread_started) {
    uv_mutex_lock(&p->mu);
    sync_ns = p->m_sync_ns;
    uv_mutex_unlock(&p->mu);
  }
  mu_buf_printf(out,
                "# TYPE musterd_wal_records_total counter\nmusterd_wal_records_total %llu\n"
                "# TYPE musterd_wal_fsyncs_total counter\nmusterd_wal_fsyncs_total %llu\n"
                "# TYPE musterd_wal_bytes_total counter\nmusterd_wal_bytes_total %llu\n"
                "# TYPE musterd_wal_max_batch_bytes gauge\nmusterd_wal_max_batch_bytes %llu\n"
                "# TYPE musterd_snapshots_total counter\nmusterd_snapshots_total %llu\n"
                "# TYPE musterd_snapshot_failures_total counter\n"
                "musterd_snapshot_failures_total %llu\n"
                "# TYPE musterd_snapshot_in_progress gauge\nmusterd_snapshot_in_progress %d\n"
                "# TYPE musterd_snapshot_start_ms gauge\nmusterd_snapshot_start_ms %.3f\n"
                "# TYPE musterd_snapshot_duration_ms gauge\nmusterd_snapshot_duration_ms %.3f\n"
                "# TYPE musterd_snapshots_on_loop_total counter\n"
                "musterd_snapshots_on_loop_total %llu\n"
                "# TYPE musterd_snapshot_bytes gauge\nmusterd_snapshot_bytes %llu\n"
                "# TYPE musterd_wal_bytes_since_snapshot gauge\n"
                "musterd_wal_bytes_since_snapshot %llu\n"
                "# TYPE musterd_disk_errors_total counter\nmusterd_disk_errors_total %llu\n"
                "# TYPE musterd_disk_read_only gauge\nmusterd_disk_read_only %d\n"
                "# TYPE musterd_disk_writes_refused_total counter\n"
                "musterd_disk_writes_refused_total %llu\n"
                "# TYPE musterd_wal_sync_seconds_total counter\n"
                "musterd_wal_sync_seconds_total %.6f\n"
                "# TYPE musterd_wal_hold_seconds_total counter\n"
                "musterd_wal_hold_seconds_total %.6f\n",
                (unsigned long long)p->appended, (unsigned long long)p->m_syncs,
                (unsigned long long)p->m_bytes, (unsigned long long)p->m_max_batch,
                (unsigned long long)p->m_snapshots, (unsigned long long)p->m_snap_failures,
                persist_snapshot_running(p), p->m_start_ms, p->m_snap_ms,
                (unsigned long long)p->m_snap_loop, (unsigned long long)p->snap_file_bytes,
                (unsigned long long)p->since_bytes, (unsigned long long)p->m_disk_errors,
                p->disk_err != 0 || p->nospace != 0, (unsigned long long)p->m_refused,
                (double)sync_ns / 1e9, (double)p->m_hold_ns / 1e9);
}

void persist_attach(struct persist *p, struct rv_server *srv)
{
  p->srv = srv;
  struct rv_module m = {"persist", p, module_close, module_metrics};
  rv_server_add_module(srv, &m);
  struct rv_barrier b = {barrier_need, barrier_read_only, barrier_read_index, p};
  rv_server_set_barrier(srv, &b);
}

void persist_free(struct persist *p)
{
  if (p == NULL)
    return;
  stop_thread(p);
  persist_snapshot_cancel(p); /* joins the compactor */
  if (p->fd >= 0)
    close(p->fd);
  if (p->snap_old_fd > 0)
    close(p->snap_old_fd);
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
