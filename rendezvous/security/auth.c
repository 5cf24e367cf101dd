/* Bearer tokens and basic-auth users (see auth.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "muster/errno.h"

#include "alloc.h"
#include "auth.h"
#include "fsutil.h"

#define AUTH_MAX_SECRET 4096
#define AUTH_MAX_USER 256
#define AUTH_MAX_ENTRIES 100000
#define AUTH_MAX_FILE (16 * 1024 * 1024)

struct auth_user {
  char *name;
  char *password;
};

struct sec_auth {
  char **tokens;
  size_t ntokens, tokens_cap;
  struct auth_user *users;
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

void sec_auth_free(struct sec_auth *a)
{
  if (a == NULL)
    return;
  for (size_t i = 0; i < a->ntokens; i++)
    wipe_free(a->tokens[i]);
  for (size_t i = 0; i < a->nusers; i++) {
    mu_free(a->users[i].name);
    wipe_free(a->users[i].password);
  }
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

int sec_auth_add_token(struct sec_auth *a, const char *token)
{
  if (!valid_secret(token, 0) || strlen(token) < 8 || a->ntokens >= AUTH_MAX_ENTRIES)
    return MU_EINVAL;
  if (a->ntokens == a->tokens_cap) {
    a->tokens_cap = a->tokens_cap ? a->tokens_cap * 2 : 4;
    a->tokens = mu_realloc(a->tokens, a->tokens_cap * sizeof(*a->tokens));
  }
  a->tokens[a->ntokens++] = mu_strdup(token);
  return 0;
}

int sec_auth_add_user(struct sec_auth *a, const char *user, const char *password)
{
  size_t ul = strlen(user);
  if (ul == 0 || ul > AUTH_MAX_USER || strchr(user, ':') != NULL || !valid_secret(user, 0) ||
      !valid_secret(password, 1) || a->nusers >= AUTH_MAX_ENTRIES)
    return MU_EINVAL;
  if (a->nusers == a->users_cap) {
    a->users_cap = a->users_cap ? a->users_cap * 2 : 4;
    a->users = mu_realloc(a->users, a->users_cap * sizeof(*a->users));
  }
  a->users[a->nusers].name = mu_strdup(user);
  a->users[a->nusers].password = mu_strdup(password);
  a->nusers++;
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
static int each_line(char *text, int (*fn)(struct sec_auth *, const char *, size_t, void *),
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

static int token_line(struct sec_auth *a, const char *line, size_t lineno, void *data)
{
  struct load_ctx *lc = data;
  if (sec_auth_add_token(a, line) != 0) {
    mu_buf_printf(lc->err,
                  "invalid token on line %zu of the token file '%s': a token is 8-4096 printable "
                  "characters without spaces, one per line",
                  lineno, lc->path);
    return MU_EINVAL;
  }
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

static int user_line(struct sec_auth *a, const char *line, size_t lineno, void *data)
{
  struct load_ctx *lc = data;
  const char *colon = strchr(line, ':');
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
        "':' or spaces, PASSWORD 1-4096 printable characters",
        lineno, lc->path);
    return MU_EINVAL;
  }
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

static int check_bearer(const struct sec_auth *a, const char *tok)
{
  size_t n = strlen(tok);
  int ok = 0;
  /* visit every token so the time does not say which one matched */
  for (size_t i = 0; i < a->ntokens; i++)
    ok |= same_secret(tok, n, a->tokens[i]);
  return ok;
}

static int check_basic(const struct sec_auth *a, const char *enc)
{
  char dec[AUTH_MAX_USER + AUTH_MAX_SECRET + 8];
  int ok = 0;
  long n = b64_decode(enc, dec, sizeof(dec));
  if (n <= 0)
    return 0;
  char *colon = memchr(dec, ':', (size_t)n);
  if (colon == NULL)
    goto out;
  *colon = '\0';
  const char *pw = colon + 1;
  size_t pwlen = (size_t)(n - (colon + 1 - dec));
  for (size_t i = 0; i < a->nusers; i++) {
    int uok = strcmp(dec, a->users[i].name) == 0;
    int pok = same_secret(pw, pwlen, a->users[i].password);
    ok |= uok & pok;
  }
out:
  OPENSSL_cleanse(dec, sizeof(dec));
  return ok;
}

int sec_auth_check(struct sec_auth *a, const char *authorization)
{
  const char *h = authorization;
  if (h != NULL)
    while (*h == ' ')
      h++;
  int verdict = SEC_AUTH_MISSING;
  if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
    h += 7;
    while (*h == ' ')
      h++;
    verdict = check_bearer(a, h) ? SEC_AUTH_GRANTED : SEC_AUTH_DENIED;
  } else if (h != NULL && strncasecmp(h, "Basic ", 6) == 0) {
    h += 6;
    while (*h == ' ')
      h++;
    verdict = check_basic(a, h) ? SEC_AUTH_GRANTED : SEC_AUTH_DENIED;
  }
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
