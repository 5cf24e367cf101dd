/* libFuzzer target: musterd's log/snapshot reader (rendezvous/persist/wal.h).
 *
 * Each input is the content of a log file. The reader walks it record by record until the end,
 * a torn tail or corruption, decoding every whole record. Checked beyond ASan/UBSan: the
 * reader only moves forward and stays inside the data; a TORN or CORRUPT verdict comes with a
 * reason; every record that decodes re-encodes to exactly the bytes it was read from (so the
 * codec has one encoding per record and the framing checksums are what the writer computes).
 *
 * Build: CC=clang cmake -DMU_FUZZ=ON ...; run: build-fuzz/fuzz/fuzz_wal_reader corpus/
 * Seeds: fuzz/corpus/fuzz_wal_reader/.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "wal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct wal_reader r;
  wal_reader_init(&r, data, size);
  struct mu_buf b = MU_BUF_INIT((size_t)1 << 30);
  for (;;) {
    size_t at = r.off;
    const unsigned char *p = NULL;
    size_t n = 0;
    int st = wal_read(&r, &p, &n);
    if (st == WAL_END) {
      if (at != size)
        __builtin_trap();
      break;
    }
    if (st == WAL_TORN || st == WAL_CORRUPT) {
      if (r.why == NULL || r.off != at)
        __builtin_trap();
      break;
    }
    if (st != WAL_RECORD || r.off <= at || r.off > size || p != data + at + WAL_HDR ||
        n != r.off - at - WAL_HDR)
      __builtin_trap();
    struct wal_rec rec;
    if (wal_rec_decode(p, n, &rec) == 0) {
      mu_buf_clear(&b);
      if (wal_rec_put(&b, &rec) != 0)
        __builtin_trap();
      if (b.len != r.off - at || memcmp(b.data, data + at, b.len) != 0)
        __builtin_trap();
    }
  }
  mu_buf_release(&b);
  return 0;
}
