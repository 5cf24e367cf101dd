/* musterd's on-disk record format, shared by the write-ahead log and snapshots (persist.c).
 *
 * A file is a sequence of framed records:
 *
 *   u32 len | u32 hcrc | u32 crc | payload[len]          (little-endian)
 *
 * `hcrc` is the masked CRC32C of the 4 length bytes, so a damaged length is told apart from a
 * record cut short; `crc` is the masked CRC32C of the payload. The reader classifies what it
 * finds at each offset (wal_read()): a whole record, the clean end, a torn tail (a power
 * cut mid-write: a partial last record, a bad checksum on the LAST record, or zeros to the end
 * of the file), or corruption (anything else, e.g. a bad checksum followed by more data).
 * A log segment may end in zeros written ahead of its records (persist/sync.c): all zeros
 * after the last record are a clean end (`padding`); a record that does not check out and lies
 * in sectors still zeroed (its header zeroed, or a whole zeroed sector among its bytes) is a
 * write the disk never finished (its sectors may land in any order), a torn tail too.
 *
 * Payloads (struct wal_rec) carry one state change of the etcd v2 store, or a snapshot's
 * header, node, history event or trailer. Nothing here touches the store, a loop or a file.
 */
#ifndef MUSTERD_PERSIST_WAL_H
#define MUSTERD_PERSIST_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define WAL_HDR 12
#define WAL_MAX_RECORD ((uint32_t)256 << 20) /* a bigger length is corruption */

/* CRC32C (Castagnoli), continuing from `crc` (start with 0). */
uint32_t wal_crc32c(uint32_t crc, const void *p, size_t n);

/* Appends one framed record holding `payload` to `out`.
 * Returns: 0, or MU_E2BIG (out is full, or n > WAL_MAX_RECORD). */
int wal_frame(struct mu_buf *out, const void *payload, size_t n);

enum wal_status {
  WAL_RECORD = 0,  /* a whole record: *payload, *len set; r->off moved past it */
  WAL_END = 1,     /* clean end of the data */
  WAL_TORN = 2,    /* torn tail starting at r->off: truncate there */
  WAL_CORRUPT = 3, /* corruption at r->off: r->why says what */
};

struct wal_reader {
  const unsigned char *data;
  size_t size;
  size_t off;      /* start of the next record */
  const char *why; /* after TORN/CORRUPT: a static description */
  int padding;     /* after TORN: only zeros follow the last record (written ahead, not torn) */
};

void wal_reader_init(struct wal_reader *r, const void *data, size_t size);

/* Reads the record at r->off. Returns: an enum wal_status.
 * Ownership: *payload points into r->data. */
int wal_read(struct wal_reader *r, const unsigned char **payload, size_t *len);

enum wal_type {
  WAL_REC_EVENT = 1,       /* a store write: action, index, key, value, expiry, event JSON */
  WAL_REC_SNAP_HEAD = 2,   /* snapshot header: index (the store's), count (nodes), aux (events),
                            * expire_ns: the first log segment it does not cover (0: written
                            * before segments were numbered, see persist_int.h) */
  WAL_REC_SNAP_NODE = 3,   /* a node: key, value (files), flags dir, index (modified), created */
  WAL_REC_SNAP_EVENT = 4,  /* a history event: as WAL_REC_EVENT (json, json_head, flags) */
  WAL_REC_SNAP_END = 5,    /* snapshot trailer: count, aux repeated */
  WAL_REC_RDZV = 6,        /* the whole native rendezvous state (rdzv_encode()) in `value`:
                            * snapshots; older logs (the last one wins, changes follow it) */
  WAL_REC_RDZV_CHANGE = 7, /* one change of it (rdzv_encode_change()) in `value`: the log */
};

enum wal_flags {
  WAL_REC_DIR = 1 << 0,       /* the node is a dir */
  WAL_REC_REFRESH = 1 << 1,   /* a TTL refresh */
  WAL_REC_CREATED = 1 << 2,   /* the event was answered 201 */
  WAL_REC_HAS_VALUE = 1 << 3, /* `value` is present (a file) */
};

/* One decoded payload. Strings are not NUL-terminated and point into the payload. */
struct wal_rec {
  uint8_t type;   /* enum wal_type */
  uint8_t action; /* enum v2_event_action */
  uint8_t flags;  /* enum wal_flags */
  uint64_t index;
  uint64_t created; /* createdIndex (nodes), or a count (snapshot head/end) */
  uint64_t aux;     /* json_head (events), or a count (snapshot head/end) */
  int64_t expire_ns;
  const char *key;
  uint32_t key_len;
  const char *value;
  uint32_t value_len;
  const char *json;
  uint32_t json_len;
};

/* Encodes `r` and appends it, framed, to `out`. Returns: 0, or MU_E2BIG. */
int wal_rec_put(struct mu_buf *out, const struct wal_rec *r);

/* Decodes a payload. Returns: 0, or MU_EPARSE (short, trailing bytes, unknown type).
 * Ownership: the strings in *r point into `p`. */
int wal_rec_decode(const unsigned char *p, size_t n, struct wal_rec *r);

#endif
