/* The persist layer (rendezvous/persist/): musterd's durability (--data-dir), a write-ahead log
 * of every etcd v2 store change and of the rendezvous state, periodic snapshots with
 * compaction, and recovery at start-up. docs/durability.md is the contract.
 *
 * Owns: the record format (wal.h, wal.c), records (records.c), snapshots and the compactor
 * (snapshot.c), the log writer and its group-commit thread (sync.c), recovery (recovery.c);
 * persist_int.h is what they share.
 * May call: the etcd layer (the store and its commit hook), the rdzv layer
 * (the state machine's change hook and codec), the server layer (modules, replies) and common/.
 * The layers it logs know nothing of it: it hooks into them.
 *
 * Files in the data dir:
 *   LOCK                          flock()ed while a musterd uses the dir
 *   snap-<index>.snap             the whole store (nodes + event history + /v1) at <index>
 *   wal-<seq>-<first index>.log   log segments numbered 1, 2, ...: the records after the
 *                                 snapshot (which names the first segment it does not cover),
 *                                 framed as wal.h describes (older musterds: wal-<first>.log)
 *
 * Every store write calls the store's commit hook, which appends one record. What "written"
 * means depends on the fsync mode:
 *   always  write() + fdatasync() in the hook, before the reply is built;
 *   batch   group commit: records gather in memory; after each loop iteration a dedicated
 *           thread write()s and fdatasync()s them as one batch while the loop keeps serving;
 *           every output a connection queues meanwhile (replies, errors, watch events) is held
 *           by the server's barrier (rv_server_set_barrier()) until the records appended before
 *           it are durable;
 *   off     write() in the hook (survives a crash of musterd, not of the machine).
 * Every `snapshot_every` records, or once the log since the last snapshot exceeds the larger of
 * `snapshot_bytes` and twice the last snapshot's size, a new log segment is started and a
 * compactor thread builds a
 * snapshot from the previous one and the closed segments (temp file, fsync, rename) while the
 * loop keeps serving; once the snapshot is durable the older snapshots and segments are deleted. A
 * snapshot that fails is reported and tried again later; the log keeps everything meanwhile.
 *
 * A disk that fills up or fails does not stop musterd: writes are refused before they are
 * applied (the server's barrier's read_only hook) while reads go on, a record that could not be
 * written is written again by a timer and nothing that reveals it is sent before it is durable,
 * and writes resume by themselves once the disk takes them (see "Disk errors" in sync.c).
 */
#ifndef MUSTERD_PERSIST_PERSIST_H
#define MUSTERD_PERSIST_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"

struct rdzv;
struct v2_store;
struct rv_server;

enum persist_fsync {
  PERSIST_FSYNC_BATCH = 0,
  PERSIST_FSYNC_ALWAYS,
  PERSIST_FSYNC_OFF,
};

#define PERSIST_SNAPSHOT_EVERY 100000
#define PERSIST_SNAPSHOT_BYTES ((uint64_t)64 << 20)

/* Returns: 0 with *out set, or MU_EINVAL for a name other than always, batch, off. */
int persist_fsync_parse(const char *name, enum persist_fsync *out);
const char *persist_fsync_name(enum persist_fsync m);

/* What recovery found, for the start-up report. Release with persist_report_release(). */
struct persist_report {
  struct mu_buf snapshot; /* the snapshot file loaded, "" if none */
  uint64_t snapshot_index;
  uint64_t snapshot_nodes;
  uint64_t segments; /* log files read */
  uint64_t records;  /* log records applied */
  uint64_t skipped;  /* log records already in the snapshot */
  uint64_t keys;     /* files in the store after recovery */
  uint64_t dirs;     /* dirs, not counting the root */
  uint64_t index;    /* the global index after recovery */
  uint64_t events;   /* events in the history */
  uint64_t expired;  /* keys whose deadline passed while down, expired at start-up */
  uint64_t runs;     /* native rendezvous runs restored */
  double elapsed_ms;
  struct mu_buf warning; /* truncated torn tails: file, offset, bytes dropped, why; "" if none */
};

/* Frees the report's strings. Accepts NULL. */
void persist_report_release(struct persist_report *rep);

struct persist;

/* Opens (creating it if missing) and locks the data dir `dir`, loads the newest snapshot into
 * `s` (which must be new and empty) and the native rendezvous `rdzv` (NULL: none; it must
 * have no run yet), replays the log after it (truncating a torn tail), expires
 * keys whose deadline has passed, and starts logging every write of `s`. A snapshot is taken
 * every `snapshot_every` records (0: never by count) and whenever the log since the last one
 * exceeds max(`snapshot_bytes`, 2 x the last snapshot's size) bytes (0: never by size).
 * Returns: the handle, or NULL with a message naming the problem (file, byte offset) and the
 * fix appended to `err`. `rep` is filled either way (release it).
 * Ownership: `s` and `loop` are borrowed and must outlive the handle; `dir` is copied. Free
 * with persist_free() after the loop has finished. */
struct persist *persist_open(const char *dir, enum persist_fsync mode, uint64_t snapshot_every,
                             uint64_t snapshot_bytes, struct v2_store *s, struct rdzv *rdzv,
                             uv_loop_t *loop, struct persist_report *rep, struct mu_buf *err);

/* Registers the module "persist" on `srv` (/metrics, shutdown hook) and installs the server's
 * durability barrier: no output reveals a record before it is durable. */
void persist_attach(struct persist *p, struct rv_server *srv);

/* Graceful stop, before rv_server_close(): waits for the batch being synced, syncs the rest,
 * sends every held output, writes a final snapshot and stops logging. Returns: 0, or a
 * negative errno from the disk (the log is still consistent up to the last sync). */
int persist_stop(struct persist *p);

/* Writes a snapshot now, on the calling thread, and compacts (tests, persist_stop()); a
 * snapshot being written in the background is abandoned first. Returns: 0 or -errno. */
int persist_snapshot(struct persist *p);

/* Returns: 1 while a snapshot is taken in the background (its segment switched, the compactor
 * not done), else 0. */
int persist_snapshot_running(const struct persist *p);

/* Syncs what is pending, stops logging (without touching the store) and closes the handle's
 * loop handles; run the loop once more before persist_free(). The "persist" module calls it
 * from rv_server_close(); call it yourself when the handle was never attached. Accepts NULL. */
void persist_close(struct persist *p);

/* Frees the handle (after persist_close() and the loop has run). Accepts NULL. */
void persist_free(struct persist *p);

#endif
