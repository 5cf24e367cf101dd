/* Bearer tokens and basic-auth users (see auth.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "muster/errno.h"

#include "alloc.h"
#include "auth.h"
#include "fsutil.h"
#include "opts.h"

#define AUTH_MAX_SECRET 4096
#define AUTH_MAX_USER 256
#define AUTH_MAX_ENTRIES 100000
#define AUTH_MAX_FILE (16 * 1024 * 1024)

/* One token or user and what it may reach. The scope strings are owned (cred's arrays). */
struct auth_entry {
  char *name;   /* the user; NULL for a token */
  char *secret; /* the token, or the user's password */
  struct rv_cred cred;
  char from[96]; /* where it was configured ("line 3 of the token file '...'"), for the log */
};

struct sec_auth {
  struct auth_entry *tokens;
  size_t ntokens, tokens_cap;
  struct auth_entry *users;
  size_t nusers, users_cap;
  uint64_t granted, missing, denied;
};

struct sec_auth *sec_auth_new(void)
{
  return mu_calloc(1, sizeof(struct sec_auth));
}

static void wipe_free(char *s)
{
  if (s == NULL)
    return;
  OPENSSL_cleanse(s, strlen(s));
  mu_free(s);
}

static void entry_release(struct auth_entry *e)
{
  mu_free(e->name);
  wipe_free(e->secret);
  for (size_t i = 0; i < e->cred.nruns; i++)
    mu_free((char *)e->cred.runs[i]);
  for (size_t i = 0; i < e->cred.nkeys; i++)
    mu_free((char *)e->cred.keys[i]);
  mu_free((void *)e->cred.runs);
  mu_free((void *)e->cred.keys);
}

void sec_auth_free(struct sec_auth *a)
{
  if (a == NULL)
    return;
  for (size_t i = 0; i < a->ntokens; i++)
    entry_release(&a->tokens[i]);
  for (size_t i = 0; i < a->nusers; i++)
    entry_release(&a->users[i]);
  mu_free(a->tokens);
  mu_free(a->users);
  mu_free(a);
}

void sec_auth_counts(const struct sec_auth *a, size_t *ntokens, size_t *nusers)
{
  *ntokens = a != NULL ? a->ntokens : 0;
  *nusers = a != NULL ? a->nusers : 0;
}

int sec_auth_enabled(const struct sec_auth *a)
{
  return a != NULL && (a->ntokens > 0 || a->nusers > 0);
}

/* A token or password: printable ASCII, no spaces (tokens) / no control chars (passwords). */
static int valid_secret(const char *s, int allow_space)
{
  size_t n = strlen(s);
  if (n == 0 || n > AUTH_MAX_SECRET)
    return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x20 || ch == 0x7f || (ch == ' ' && !allow_space))
      return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Scopes: "runs=GLOB keys=/PREFIX read-only quota-watchers=N quota-value-bytes=N"
 */

#define AUTH_MAX_SCOPE 1024

/* Does `w` start like a scope word (so that a bad one is an error, not part of a password)? */
static int scope_like(const char *w)
{
  return strncmp(w, "runs=", 5) == 0 || strncmp(w, "keys=", 5) == 0 ||
         strncmp(w, "quota-", 6) == 0 || strcmp(w, "read-only") == 0;
}

static void push(const char ***arr, size_t *n, char *s)
{
  *arr = mu_realloc((void *)*arr, (*n + 1) * sizeof(**arr));
  (*arr)[(*n)++] = s;
}

/* Adds scope word `w` to `c`. Returns: 0, or -1 with the reason in why[0..size). */
static int add_scope(struct rv_cred *c, const char *w, char *why, size_t size)
{
  size_t n = strlen(w);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)w[i] <= 0x20 || w[i] == 0x7f) {
      snprintf(why, size, "scope '%.64s' holds a control character", w);
      return -1;
    }
  if (strcmp(w, "read-only") == 0) {
    c->read_only = 1;
    return 0;
  }
  if (strncmp(w, "runs=", 5) == 0 && n > 5 && n - 5 <= 128) {
    push(&c->runs, &c->nruns, mu_strdup(w + 5));
    c->scoped = 1;
    return 0;
  }
  if (strncmp(w, "keys=", 5) == 0 && w[5] == '/' && n - 5 <= AUTH_MAX_SCOPE) {
    size_t pl = n - 5;
    while (pl > 0 && w[5 + pl - 1] == '/')
      pl--; /* "/a/" and "/a" name the same subtree; "/" all of it ("") */
    push(&c->keys, &c->nkeys, mu_strndup(w + 5, pl));
    c->scoped = 1;
    return 0;
  }
  long v = 0;
  if (strncmp(w, "quota-watchers=", 15) == 0 && mu_parse_long(w + 15, 1, LONG_MAX, &v) == 0) {
    c->quota_watchers = (uint64_t)v;
    return 0;
  }
  if (strncmp(w, "quota-value-bytes=", 18) == 0 && mu_parse_long(w + 18, 1, LONG_MAX, &v) == 0) {
    c->quota_value_bytes = (uint64_t)v;
    return 0;
  }
  snprintf(why, size,
           "bad scope '%.64s': scopes are runs=GLOB (a /v1 run id pattern, 1-128 bytes), "
           "keys=/PREFIX (a v2 key path), read-only, quota-watchers=N, quota-value-bytes=N",
           w);
  return -1;
}

/* The id of a credential: 32 bits of the SHA-256 of its secret (a user's "NAME:PASSWORD"). */
static void cred_id(struct rv_cred *c, const char *name, const char *secret)
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  char *s = name != NULL ? mu_asprintf("%s:%s", name, secret) : mu_strdup(secret);
  if (EVP_Digest(s, strlen(s), md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < 4)
    memset(md, 0, 4);
  snprintf(c->id, sizeof(c->id), "credential#%02x%02x%02x%02x", md[0], md[1], md[2], md[3]);
  wipe_free(s);
}

/* Grows `*arr` for one more entry and returns it, zeroed. */
static struct auth_entry *entry_new(struct auth_entry **arr, size_t *n, size_t *cap)
{
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 4;
    *arr = mu_realloc(*arr, *cap * sizeof(**arr));
  }
  struct auth_entry *e = &(*arr)[(*n)++];
  memset(e, 0, sizeof(*e));
  return e;
}

int sec_auth_add_token(struct sec_auth *a, const char *token)
{
  if (!valid_secret(token, 0) || strlen(token) < 8 || a->ntokens >= AUTH_MAX_ENTRIES)
    return MU_EINVAL;
  struct auth_entry *e = entry_new(&a->tokens, &a->ntokens, &a->tokens_cap);
  e->secret = mu_strdup(token);
  cred_id(&e->cred, NULL, token);
  snprintf(e->from, sizeof(e->from), "a token");
  return 0;
}

int sec_auth_add_user(struct sec_auth *a, const char *user, const char *password)
{
  size_t ul = strlen(user);
  if (ul == 0 || ul > AUTH_MAX_USER || strchr(user, ':') != NULL || !valid_secret(user, 0) ||
      !valid_secret(password, 1) || a->nusers >= AUTH_MAX_ENTRIES)
    return MU_EINVAL;
  struct auth_entry *e = entry_new(&a->users, &a->nusers, &a->users_cap);
  e->name = mu_strdup(user);
  e->secret = mu_strdup(password);
  cred_id(&e->cred, user, password);
  snprintf(e->from, sizeof(e->from), "user '%.64s'", user);
  return 0;
}

/* Reads a whole (small) file into *out (NUL-terminated); wipes what it read on failure. */
static int read_file(const char *path, char **out, const char *what, struct mu_buf *err)
{
  struct mu_buf b = MU_BUF_INIT(AUTH_MAX_FILE);
  int rc = mu_read_file(path, AUTH_MAX_FILE, &b);
  *out = NULL;
  if (rc == MU_E2BIG)
    mu_buf_printf(err, "the %s '%s' is over 16 MiB", what, path);
  else if (rc != 0)
    mu_buf_printf(err, "cannot read the %s '%s': %s", what, path, mu_strerror(rc));
  if (rc != 0) {
    if (b.data != NULL)
      OPENSSL_cleanse(b.data, b.len);
    mu_buf_release(&b);
    return MU_EINVAL;
  }
  *out = mu_buf_detach(&b);
  return 0;
}

/* Splits `text` into trimmed lines in place; calls fn for each non-blank, non-comment one. */
static int each_line(char *text, int (*fn)(struct sec_auth *, char *, size_t, void *),
                     struct sec_auth *a, void *data)
{
  size_t lineno = 0;
  char *p = text;
  while (*p != '\0') {
    char *end = strchr(p, '\n');
    char *next = end != NULL ? end + 1 : p + strlen(p);
    if (end != NULL)
      *end = '\0';
    lineno++;
    while (*p == ' ' || *p == '\t')
      p++;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
      p[--n] = '\0';
    if (n > 0 && p[0] != '#') {
      int rc = fn(a, p, lineno, data);
      if (rc != 0)
        return rc;
    }
    p = next;
  }
  return 0;
}

struct load_ctx {
  const char *path;
  struct mu_buf *err;
  size_t added;
};

/* Parses the scope words of `words` (split at spaces and tabs, in place) into `e`'s credential.
 * Returns: 0, or MU_EINVAL with a message naming the line appended to lc->err. */
static int entry_scopes(struct auth_entry *e, char *words, size_t lineno, const char *what,
                        struct load_ctx *lc)
{
  char why[320];
  for (char *w = words; *w != '\0';) {
    size_t n = strcspn(w, " \t");
    char save = w[n];
    w[n] = '\0';
    int rc = n > 0 ? add_scope(&e->cred, w, why, sizeof(why)) : 0;
    w[n] = save;
    if (rc != 0) {
      mu_buf_printf(lc->err, "line %zu of the %s '%s': %s", lineno, what, lc->path, why);
      return MU_EINVAL;
    }
    w += n;
    w += strspn(w, " \t");
  }
  snprintf(e->from, sizeof(e->from), "line %zu of the %s", lineno, what);
  return 0;
}

static int token_line(struct sec_auth *a, char *line, size_t lineno, void *data)
{
  struct load_ctx *lc = data;
  size_t n = strcspn(line, " \t");
  char save = line[n];
  line[n] = '\0';
  int rc = sec_auth_add_token(a, line);
  line[n] = save;
  if (rc != 0) {
    mu_buf_printf(lc->err,
                  "invalid token on line %zu of the token file '%s': a token is 8-4096 printable "
                  "characters without spaces, one per line (scopes may follow it)",
                  lineno, lc->path);
    return MU_EINVAL;
  }
  OPENSSL_cleanse(line, n);
  rc = entry_scopes(&a->tokens[a->ntokens - 1], line + n + strspn(line + n, " \t"), lineno,
                    "token file", lc);
  if (rc != 0)
    return rc;
  lc->added++;
  return 0;
}

int sec_auth_load_tokens(struct sec_auth *a, const char *path, struct mu_buf *err)
{
  char *text = NULL;
  struct load_ctx lc = {path, err, 0};
  int rc = read_file(path, &text, "token file", err);
  if (rc != 0)
    goto out;
  rc = each_line(text, token_line, a, &lc);
  if (rc == 0 && lc.added == 0) {
    mu_buf_printf(err,
                  "the token file '%s' holds no token (write one token per line, e.g. from "
                  "`openssl rand -hex 32`)",
                  path);
    rc = MU_EINVAL;
  }
out:
  wipe_free(text);
  return rc;
}

/* The scopes at the end of a users-file line: trailing words that start like a scope (a
 * password may hold spaces: what comes before them is the password). Returns: where they
 * start (the line's end when none), the line cut before them. */
static char *user_scopes(char *line)
{
  char *end = line + strlen(line), *from = end;
  for (;;) {
    char *sp = from;
    while (sp > line && sp[-1] != ' ' && sp[-1] != '\t')
      sp--;
    if (sp == line || !scope_like(sp))
      break;
    from = sp;
    while (from > line && (from[-1] == ' ' || from[-1] == '\t'))
      from--;
    if (from == line)
      break;
  }
  if (from == end)
    return end;
  char *words = from + strspn(from, " \t");
  *from = '\0'; /* the password ends here */
  return words;
}

static int user_line(struct sec_auth *a, char *line, size_t lineno, void *data)
{
  struct load_ctx *lc = data;
  char *words = user_scopes(line);
  char *colon = strchr(line, ':');
  if (colon == NULL || colon == line) {
    mu_buf_printf(lc->err, "invalid line %zu of the users file '%s': expected USER:PASSWORD",
                  lineno, lc->path);
    return MU_EINVAL;
  }
  char user[AUTH_MAX_USER + 1];
  size_t ul = (size_t)(colon - line);
  int bad = ul > AUTH_MAX_USER;
  if (!bad) {
    memcpy(user, line, ul);
    user[ul] = '\0';
    bad = sec_auth_add_user(a, user, colon + 1) != 0;
  }
  if (bad) {
    mu_buf_printf(
        lc->err,
        "invalid user on line %zu of the users file '%s': USER is 1-256 characters without "
        "':' or spaces, PASSWORD 1-4096 printable characters (scopes may follow it)",
        lineno, lc->path);
    return MU_EINVAL;
  }
  OPENSSL_cleanse(colon + 1, strlen(colon + 1));
  int rc = entry_scopes(&a->users[a->nusers - 1], words, lineno, "users file", lc);
  if (rc != 0)
    return rc;
  lc->added++;
  return 0;
}

int sec_auth_load_users(struct sec_auth *a, const char *path, struct mu_buf *err)
{
  char *text = NULL;
  struct load_ctx lc = {path, err, 0};
  int rc = read_file(path, &text, "users file", err);
  if (rc != 0)
    goto out;
  rc = each_line(text, user_line, a, &lc);
  if (rc == 0 && lc.added == 0) {
    mu_buf_printf(err, "the users file '%s' holds no user (write USER:PASSWORD lines)", path);
    rc = MU_EINVAL;
  }
out:
  wipe_free(text);
  return rc;
}

int sec_auth_add_user_spec(struct sec_auth *a, const char *spec, struct mu_buf *err)
{
  char *text = NULL;
  char user[AUTH_MAX_USER + 1];
  int rc = 0;
  const char *colon = strchr(spec, ':');
  if (colon == NULL || colon == spec || colon[1] == '\0' ||
      (size_t)(colon - spec) > AUTH_MAX_USER) {
    mu_buf_printf(err,
                  "invalid --auth-user '%s': expected USER:PASSFILE (the password is read from "
                  "PASSFILE so that it does not show in ps)",
                  spec);
    return MU_EINVAL;
  }
  memcpy(user, spec, (size_t)(colon - spec));
  user[colon - spec] = '\0';
  rc = read_file(colon + 1, &text, "password file", err);
  if (rc != 0)
    goto out;
  char *nl = strchr(text, '\n');
  if (nl != NULL)
    *nl = '\0';
  size_t n = strlen(text);
  if (n > 0 && text[n - 1] == '\r')
    text[n - 1] = '\0';
  if (sec_auth_add_user(a, user, text) != 0) {
    mu_buf_printf(
        err,
        "invalid --auth-user '%s': USER is 1-256 characters without ':' or spaces and the "
        "first line of the password file must be a 1-4096 character password",
        spec);
    rc = MU_EINVAL;
  }
out:
  wipe_free(text);
  return rc;
}

/* Constant time in the secret's contents (the length of the candidate may leak). */
static int same_secret(const char *a, size_t alen, const char *b)
{
  size_t blen = strlen(b);
  if (alen != blen)
    return 0;
  return CRYPTO_memcmp(a, b, alen) == 0;
}

static int b64val(int ch)
{
  if (ch >= 'A' && ch <= 'Z')
    return ch - 'A';
  if (ch >= 'a' && ch <= 'z')
    return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9')
    return ch - '0' + 52;
  if (ch == '+' || ch == '-')
    return 62;
  if (ch == '/' || ch == '_')
    return 63;
  return -1;
}

/* Decodes standard base64 (padding optional) into dst (cap bytes).
 * Returns: the length, or -1 for bad input or too long. */
static long b64_decode(const char *src, char *dst, size_t cap)
{
  unsigned acc = 0;
  int bits = 0;
  size_t o = 0;
  for (const char *s = src; *s != '\0'; s++) {
    if (*s == '=')
      break;
    int v = b64val((unsigned char)*s);
    if (v < 0)
      return -1;
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (o + 1 >= cap)
        return -1;
      dst[o++] = (char)((acc >> bits) & 0xff);
    }
  }
  dst[o] = '\0';
  return (long)o;
}

/* The entry of token `tok`, or NULL. Every token is compared so that the time does not say
 * which one matched (or whether one did), and the pick is branch-free. */
static const struct auth_entry *check_bearer(const struct sec_auth *a, const char *tok)
{
  size_t n = strlen(tok), hit = 0, found = 0;
  for (size_t i = 0; i < a->ntokens; i++) {
    size_t m = (size_t)same_secret(tok, n, a->tokens[i].secret);
    hit ^= (hit ^ i) & ((size_t)0 - m);
    found |= m;
  }
  return found ? &a->tokens[hit] : NULL;
}

static const struct auth_entry *check_basic(const struct sec_auth *a, const char *enc)
{
  char dec[AUTH_MAX_USER + AUTH_MAX_SECRET + 8];
  size_t hit = 0, found = 0;
  long n = b64_decode(enc, dec, sizeof(dec));
  if (n <= 0)
    return NULL;
  char *colon = memchr(dec, ':', (size_t)n);
  if (colon == NULL)
    goto out;
  *colon = '\0';
  const char *pw = colon + 1;
  size_t pwlen = (size_t)(n - (colon + 1 - dec));
  for (size_t i = 0; i < a->nusers; i++) {
    size_t uok = strcmp(dec, a->users[i].name) == 0;
    size_t m = uok & (size_t)same_secret(pw, pwlen, a->users[i].secret);
    hit ^= (hit ^ i) & ((size_t)0 - m);
    found |= m;
  }
out:
  OPENSSL_cleanse(dec, sizeof(dec));
  return found ? &a->users[hit] : NULL;
}

int sec_auth_check(struct sec_auth *a, const char *authorization)
{
  const struct rv_cred *cred = NULL;
  return sec_auth_verify(a, authorization, &cred);
}

int sec_auth_verify(struct sec_auth *a, const char *authorization, const struct rv_cred **cred)
{
  const struct auth_entry *e = NULL;
  *cred = NULL;
  const char *h = authorization;
  if (h != NULL)
    while (*h == ' ')
      h++;
  int verdict = SEC_AUTH_MISSING;
  if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
    h += 7;
    while (*h == ' ')
      h++;
    e = check_bearer(a, h);
    verdict = e != NULL ? SEC_AUTH_GRANTED : SEC_AUTH_DENIED;
  } else if (h != NULL && strncasecmp(h, "Basic ", 6) == 0) {
    h += 6;
    while (*h == ' ')
      h++;
    e = check_basic(a, h);
    verdict = e != NULL ? SEC_AUTH_GRANTED : SEC_AUTH_DENIED;
  }
  if (e != NULL)
    *cred = &e->cred;
  if (verdict == SEC_AUTH_GRANTED)
    a->granted++;
  else if (verdict == SEC_AUTH_MISSING)
    a->missing++;
  else
    a->denied++;
  return verdict;
}

const char *sec_auth_refusal(int verdict)
{
  if (verdict == SEC_AUTH_DENIED)
    return "the token or user/password is not valid for this musterd (check MUSTER_RDZV_TOKEN "
           "against the server's --token-file)";
  return "this musterd requires a token: send 'Authorization: Bearer TOKEN' (muster agent: set "
         "MUSTER_RDZV_TOKEN)";
}

const char *sec_auth_challenge(const struct sec_auth *a)
{
  static const char basic[] = "WWW-Authenticate: Basic realm=\"musterd\", charset=\"UTF-8\"\r\n";
  static const char bearer[] = "WWW-Authenticate: Bearer realm=\"musterd\"\r\n";
  static const char both[] = "WWW-Authenticate: Basic realm=\"musterd\", charset=\"UTF-8\"\r\n"
                             "WWW-Authenticate: Bearer realm=\"musterd\"\r\n";
  int users = a != NULL && a->nusers > 0, tokens = a != NULL && a->ntokens > 0;
  return users && tokens ? both : users ? basic : tokens ? bearer : "";
}

static void describe_entry(const struct auth_entry *e, struct mu_buf *out)
{
  const struct rv_cred *c = &e->cred;
  mu_buf_printf(out, "%s (%s):", c->id, e->from);
  if (!c->scoped && !c->read_only)
    mu_buf_puts(out, " everything");
  for (size_t i = 0; i < c->nruns; i++)
    mu_buf_printf(out, " runs=%s", c->runs[i]);
  for (size_t i = 0; i < c->nkeys; i++)
    mu_buf_printf(out, " keys=%s", c->keys[i][0] ? c->keys[i] : "/");
  if (c->read_only)
    mu_buf_puts(out, " read-only");
  if (c->quota_watchers > 0)
    mu_buf_printf(out, " quota-watchers=%llu", (unsigned long long)c->quota_watchers);
  if (c->quota_value_bytes > 0)
    mu_buf_printf(out, " quota-value-bytes=%llu", (unsigned long long)c->quota_value_bytes);
  mu_buf_putc(out, '\n');
}

void sec_auth_describe(const struct sec_auth *a, struct mu_buf *out)
{
  for (size_t i = 0; a != NULL && i < a->ntokens; i++)
    describe_entry(&a->tokens[i], out);
  for (size_t i = 0; a != NULL && i < a->nusers; i++)
    describe_entry(&a->users[i], out);
}

void sec_auth_metrics(const struct sec_auth *a, struct mu_buf *out)
{
  if (a == NULL)
    return;
  mu_buf_printf(out,
                "# HELP musterd_auth_requests_total Requests checked for credentials, by verdict.\n"
                "# TYPE musterd_auth_requests_total counter\n"
                "musterd_auth_requests_total{verdict=\"granted\"} %llu\n"
                "musterd_auth_requests_total{verdict=\"missing\"} %llu\n"
                "musterd_auth_requests_total{verdict=\"denied\"} %llu\n",
                (unsigned long long)a->granted, (unsigned long long)a->missing,
                (unsigned long long)a->denied);
}
