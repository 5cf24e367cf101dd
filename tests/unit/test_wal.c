/* The log record format (rendezvous/persist/wal.h): CRC32C, framing, the reader's tail rules. */
#include "muster/errno.h"

#include "buf.h"
#include "task.h"
#include "wal.h"

TEST(wal__crc32c_check_value)
{
  /* the CRC-32C check value (RFC 3720 B.4) */
  ASSERT_EQ(wal_crc32c(0, "123456789", 9), 0xE3069283u);
  /* incremental = one shot, across the 8-byte fast path */
  const char *s = "The quick brown fox jumps over the lazy dog";
  uint32_t a = wal_crc32c(0, s, 43);
  uint32_t b = wal_crc32c(wal_crc32c(0, s, 13), s + 13, 30);
  ASSERT_EQ(a, b);
  ASSERT_EQ(wal_crc32c(0, "", 0), 0);
}

static void put_event(struct mu_buf *b, uint64_t index, const char *key, const char *value)
{
  struct wal_rec r;
  memset(&r, 0, sizeof(r));
  r.type = WAL_REC_EVENT;
  r.action = 2;
  r.flags = WAL_REC_HAS_VALUE;
  r.index = index;
  r.expire_ns = -5;
  r.key = key;
  r.key_len = (uint32_t)strlen(key);
  r.value = value;
  r.value_len = (uint32_t)strlen(value);
  r.json = "{}\n";
  r.json_len = 3;
  r.aux = 1;
  ASSERT_EQ(wal_rec_put(b, &r), 0);
}

TEST(wal__round_trip)
{
  struct mu_buf b = MU_BUF_INIT(1 << 20);
  put_event(&b, 1, "/a", "x");
  put_event(&b, 2, "/b/c", "");
  ASSERT_EQ(wal_frame(&b, "", 0), 0);
  struct wal_reader r;
  wal_reader_init(&r, b.data, b.len);
  const unsigned char *p;
  size_t n;
  struct wal_rec rec;
  ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
  ASSERT_EQ(wal_rec_decode(p, n, &rec), 0);
  ASSERT_EQ(rec.type, WAL_REC_EVENT);
  ASSERT_EQ(rec.index, 1);
  ASSERT_EQ(rec.expire_ns, -5);
  ASSERT_EQ(rec.aux, 1);
  ASSERT_EQ(rec.key_len, 2);
  ASSERT(memcmp(rec.key, "/a", 2) == 0);
  ASSERT_EQ(rec.value_len, 1);
  ASSERT_EQ(rec.value[0], 'x');
  ASSERT_EQ(rec.json_len, 3);
  ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
  ASSERT_EQ(wal_rec_decode(p, n, &rec), 0);
  ASSERT_EQ(rec.index, 2);
  ASSERT_EQ(rec.value_len, 0);
  ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
  ASSERT_EQ(n, 0);
  ASSERT_EQ(wal_rec_decode(p, n, &rec), MU_EPARSE); /* an empty payload is no record */
  ASSERT_EQ(wal_read(&r, &p, &n), WAL_END);
  mu_buf_release(&b);
}

TEST(wal__torn_tail_every_offset)
{
  struct mu_buf b = MU_BUF_INIT(1 << 20);
  put_event(&b, 1, "/a", "first");
  put_event(&b, 2, "/b", "second");
  size_t second = 0;
  {
    struct wal_reader r;
    const unsigned char *p;
    size_t n;
    wal_reader_init(&r, b.data, b.len);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    second = r.off;
  }
  put_event(&b, 3, "/c", "third, the last record");
  size_t last = 0;
  {
    struct wal_reader r;
    const unsigned char *p;
    size_t n;
    wal_reader_init(&r, b.data, b.len);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    last = r.off;
  }
  ASSERT(second > 0 && last > second);
  /* cut anywhere inside the last record: two whole records, then a torn tail at `last` */
  for (size_t cut = last + 1; cut < b.len; cut++) {
    struct wal_reader r;
    const unsigned char *p;
    size_t n;
    wal_reader_init(&r, b.data, cut);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_TORN);
    ASSERT_EQ(r.off, last);
  }
  /* a flipped byte in the last record's payload: torn (its checksum fails at the end) */
  for (size_t at = last + WAL_HDR; at < b.len; at++) {
    b.data[at] ^= 0x40;
    struct wal_reader r;
    const unsigned char *p;
    size_t n;
    wal_reader_init(&r, b.data, b.len);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_TORN);
    b.data[at] ^= 0x40;
  }
  /* zeros after the last whole record (a file extended but never written): torn */
  size_t len = b.len;
  char zeros[64] = {0};
  mu_buf_append(&b, zeros, sizeof(zeros));
  {
    struct wal_reader r;
    const unsigned char *p;
    size_t n;
    wal_reader_init(&r, b.data, b.len);
    for (int i = 0; i < 3; i++)
      ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_TORN);
    ASSERT_EQ(r.off, len);
  }
  mu_buf_release(&b);
}

TEST(wal__corruption_in_the_middle)
{
  struct mu_buf b = MU_BUF_INIT(1 << 20);
  put_event(&b, 1, "/a", "first");
  size_t second = b.len;
  put_event(&b, 2, "/b", "second");
  put_event(&b, 3, "/c", "third");
  /* any byte of the second record (header or payload) flipped: corrupt at its offset */
  for (size_t at = second; at < second + WAL_HDR + 20; at++) {
    b.data[at] ^= 0x01;
    struct wal_reader r;
    const unsigned char *p;
    size_t n;
    wal_reader_init(&r, b.data, b.len);
    ASSERT_EQ(wal_read(&r, &p, &n), WAL_RECORD);
    int st = wal_read(&r, &p, &n);
    if (at < second + 4) {
      /* a damaged length: still caught, as corrupt or (length past the end) torn */
      ASSERT(st == WAL_CORRUPT || st == WAL_TORN);
    } else {
      ASSERT_EQ(st, WAL_CORRUPT);
      ASSERT_EQ(r.off, second);
      ASSERT(r.why != NULL);
    }
    b.data[at] ^= 0x01;
  }
  mu_buf_release(&b);
}

TEST(wal__decode_rejects_garbage)
{
  struct wal_rec rec;
  unsigned char junk[64];
  memset(junk, 0xff, sizeof(junk));
  ASSERT_EQ(wal_rec_decode(junk, sizeof(junk), &rec), MU_EPARSE);
  junk[0] = WAL_REC_EVENT;
  ASSERT_EQ(wal_rec_decode(junk, sizeof(junk), &rec), MU_EPARSE);
  ASSERT_EQ(wal_rec_decode(junk, 3, &rec), MU_EPARSE);
}
