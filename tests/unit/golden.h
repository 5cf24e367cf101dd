/* The TorchX cases (tests/golden/torchx-NN_.../case.json) drive the unit tests that check them.
 *
 * A case file holds inputs and expectations; a test file holds one check per item of the case,
 * written as assertions in C and fed from the file:
 *
 *   static const struct golden_check case03[] = {
 *       {"a_volume_mount_pvc", check_a},  ...  {NULL, NULL}};
 *   TEST(k8s__torchx03) { golden_case_run("torchx-03_k8s_mounts_devices_nodeselector", case03); }
 *
 * The items of a case are its subcases (by "name"), the case itself when it has a top-level
 * "input" or "expected_file" ("main"), each key of "extra_assertions" ("extra_assertions.KEY"),
 * each text of "literal_assertions" and "behaviour_assertions" (the text is the item), its
 * "rule", and its state tables (upper-case keys such as "JOB_STATE"). golden_case_run() fails
 * when an item has no check (a new subcase cannot be ignored), when a check names no item (a
 * renamed one), when the case has a key it does not know, and when a check leaves a key of its
 * item's "expected" object unread: a check reads expectations with golden_expect(), or marks a
 * deliberate divergence (listed in the case's DIVERGENCES.md) with golden_diverges().
 *
 * The functions are static inline so that a test file using only some of them does not warn.
 */
#ifndef MU_TEST_GOLDEN_H
#define MU_TEST_GOLDEN_H

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "alloc.h"
#include "buf.h"
#include "fsutil.h"
#include "job.h"
#include "sched.h"
#include "task.h"

/* tests/ of the source tree, from this file's path. Returns: a new string (mu_free). */
static inline char *golden_tests_dir(void)
{
  const char *f = __FILE__, *slash = strrchr(f, '/');
  return mu_asprintf("%.*s/..", (int)(slash - f), f);
}

/* The contents of tests/golden/REL (REL may start with "../fixtures/"); fails the test when it
 * cannot be read. Returns: a NUL-terminated copy; caller frees with mu_free(). */
static inline char *golden_slurp(const char *rel)
{
  char *tests = golden_tests_dir(), *path = mu_asprintf("%s/golden/%s", tests, rel);
  struct mu_buf b = MU_BUF_INIT(64 << 20);
  if (mu_read_file(path, 64 << 20, &b) != 0)
    MU__FAIL("cannot read %s", path);
  mu_free(path);
  mu_free(tests);
  return mu_buf_detach(&b);
}

/* The parsed tests/golden/DIR/case.json; fails the test when it does not parse.
 * Returns: a tree; caller frees with cJSON_Delete(). */
static inline cJSON *golden_case_json(const char *dir)
{
  char *rel = mu_asprintf("%s/case.json", dir), *txt = golden_slurp(rel);
  cJSON *c = cJSON_Parse(txt);
  if (c == NULL)
    MU__FAIL("tests/golden/%s is not JSON", rel);
  mu_free(rel);
  mu_free(txt);
  return c;
}

/* The app of a JSON app spec (TorchX's AppDef fields, as mu_app_to_json writes them); fails the
 * test when it does not load. Returns: a new app; caller frees with mu_app_free(). */
static inline struct mu_app *golden_app_from(const cJSON *app_json)
{
  char *s = cJSON_PrintUnformatted(app_json);
  struct mu_app *app = NULL;
  ASSERT_NOT_NULL(s);
  ASSERT_EQ(mu_app_from_json(s, &app), 0);
  cJSON_free(s);
  return app;
}

/* The app of one role spec (a subcase's "input"."role"), named APP_NAME.
 * Returns: a new app; caller frees with mu_app_free(). */
static inline struct mu_app *golden_app_of_role(const char *app_name, const cJSON *role)
{
  cJSON *app = cJSON_CreateObject(), *roles = cJSON_AddArrayToObject(app, "roles");
  struct mu_app *out;
  cJSON_AddStringToObject(app, "name", app_name);
  cJSON_AddItemToArray(roles, cJSON_Duplicate(role, 1));
  out = golden_app_from(app);
  cJSON_Delete(app);
  return out;
}

/* o.k1.k2... (NULL-terminated keys): the node, or NULL. Ownership: borrowed from o. */
static inline const cJSON *golden_at(const cJSON *o, ...)
{
  va_list ap;
  const char *k;
  va_start(ap, o);
  while (o != NULL && (k = va_arg(ap, const char *)) != NULL)
    o = cJSON_GetObjectItemCaseSensitive(o, k);
  va_end(ap);
  return o;
}

/* The string at o.KEY; fails the test when it is missing. Ownership: borrowed from o. */
static inline const char *golden_str(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsString(v))
    MU__FAIL("case.json: no string \"%s\"", key);
  return v->valuestring;
}

/* The N-th (from 0) text between single quotes in s (a prose expectation such as
 * "role_to_pod(service_account='srvacc')"); fails the test when there is none.
 * Returns: a new string (mu_free). */
static inline char *golden_quoted(const char *s, int n)
{
  const char *p = s;
  for (int i = 0;; i++) {
    const char *a = strchr(p, '\''), *b = a ? strchr(a + 1, '\'') : NULL;
    if (a == NULL || b == NULL)
      MU__FAIL("case.json: no quoted text #%d in \"%s\"", n, s);
    if (i == n)
      return mu_strndup(a + 1, (size_t)(b - a - 1));
    p = b + 1;
  }
}

/* Fails unless the JSON values are equal, printing both. */
#define GOLDEN_JSON_EQ(got, want, what)                                                            \
  do {                                                                                             \
    const cJSON *g_ = (got), *w_ = (want);                                                         \
    if (!cJSON_Compare(g_, w_, 1)) {                                                               \
      char *gs_ = g_ ? cJSON_PrintUnformatted(g_) : NULL;                                          \
      char *ws_ = w_ ? cJSON_PrintUnformatted(w_) : NULL;                                          \
      MU__FAIL("%s differs\n--- got\n%s\n--- want\n%s", (what), gs_ ? gs_ : "(none)",              \
               ws_ ? ws_ : "(none)");                                                              \
    }                                                                                              \
  } while (0)

/* Fails unless every key of WANT is in GOT with an equal value (objects compared this way
 * recursively, arrays item by item with equal lengths): for expectations that name only some
 * fields. WHAT names the value in the message. */
static inline void golden_json_subset(const cJSON *got, const cJSON *want, const char *what)
{
  const cJSON *w;
  if (cJSON_IsObject(want)) {
    if (!cJSON_IsObject(got))
      GOLDEN_JSON_EQ(got, want, what);
    cJSON_ArrayForEach(w, want)
    {
      char *sub = mu_asprintf("%s.%s", what, w->string);
      golden_json_subset(cJSON_GetObjectItemCaseSensitive(got, w->string), w, sub);
      mu_free(sub);
    }
  } else if (cJSON_IsArray(want)) {
    int i = 0;
    if (!cJSON_IsArray(got) || cJSON_GetArraySize(got) != cJSON_GetArraySize(want))
      GOLDEN_JSON_EQ(got, want, what);
    cJSON_ArrayForEach(w, want)
    {
      char *sub = mu_asprintf("%s[%d]", what, i);
      golden_json_subset(cJSON_GetArrayItem(got, i++), w, sub);
      mu_free(sub);
    }
  } else {
    GOLDEN_JSON_EQ(got, want, what);
  }
}

/* A status in the shape of TorchX's describe(): *roles gets [{name, image: "", num_replicas}]
 * (muster's status knows no image) and *statuses [{role, replicas: [{id, role, state,
 * hostname}]}], roles in the order they first appear. Ownership: both are the caller's
 * (cJSON_Delete). */
static inline void golden_status_roles(const struct mu_app_status *st, cJSON **roles,
                                       cJSON **statuses)
{
  *roles = cJSON_CreateArray();
  *statuses = cJSON_CreateArray();
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    cJSON *role = NULL, *rs = NULL, *it, *rep, *n;
    cJSON_ArrayForEach(it, *roles)
    {
      if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring, r->role) == 0)
        role = it;
    }
    cJSON_ArrayForEach(it, *statuses)
    {
      if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "role")->valuestring, r->role) == 0)
        rs = it;
    }
    if (role == NULL) {
      role = cJSON_CreateObject();
      cJSON_AddStringToObject(role, "name", r->role);
      cJSON_AddStringToObject(role, "image", "");
      cJSON_AddNumberToObject(role, "num_replicas", 0);
      cJSON_AddItemToArray(*roles, role);
      rs = cJSON_CreateObject();
      cJSON_AddStringToObject(rs, "role", r->role);
      cJSON_AddArrayToObject(rs, "replicas");
      cJSON_AddItemToArray(*statuses, rs);
    }
    n = cJSON_GetObjectItemCaseSensitive(role, "num_replicas");
    cJSON_SetNumberValue(n, n->valuedouble + 1);
    rep = cJSON_CreateObject();
    cJSON_AddNumberToObject(rep, "id", (double)r->replica_id);
    cJSON_AddStringToObject(rep, "role", r->role);
    cJSON_AddStringToObject(rep, "state", mu_job_state_name(r->state));
    cJSON_AddStringToObject(rep, "hostname", r->hostname ? r->hostname : "");
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(rs, "replicas"), rep);
  }
}

/* ------------------------------------------------------------------------ the case driver */

struct golden_check {
  const char *item; /* the id of the item it checks (see the top of this file) */
  void (*fn)(const cJSON *c, const cJSON *item); /* the whole case and the item's node */
};

/* The "expected" keys the running check has read (or marked as divergent). */
static const cJSON *golden__seen[64];
static size_t golden__nseen;
static const char *golden__item;

/* ITEM.expected.KEY (the item's "expected" object): marks the key as checked; fails the test
 * when it is missing. Ownership: borrowed from the case. */
static inline const cJSON *golden_expect(const cJSON *item, const char *key)
{
  const cJSON *v = golden_at(item, "expected", key, (const char *)NULL);
  if (v == NULL)
    MU__FAIL("%s: case.json has no expected \"%s\"", golden__item, key);
  if (golden__nseen < sizeof golden__seen / sizeof golden__seen[0])
    golden__seen[golden__nseen++] = v;
  return v;
}

/* Marks ITEM.expected.KEY as a deliberate divergence from TorchX (the case's DIVERGENCES.md
 * says why); prints it, so that the TAP output lists every divergence. */
static inline void golden_diverges(const cJSON *item, const char *key, const char *why)
{
  golden_expect(item, key);
  fprintf(stderr, "# %s: \"%s\": muster diverges: %s\n", golden__item, key, why);
}

/* The keys of a case that are descriptions, or data a check reads through the case node. */
static inline int golden__plain_key(const char *k)
{
  static const char *const plain[] = {
      "id",           "provenance",    "source", "torchx_commit", "compare", "note", "notes",
      "derived_rule", "expected_file", "input",  "expected",      "role",    NULL};
  for (size_t i = 0; plain[i]; i++)
    if (strcmp(k, plain[i]) == 0)
      return 1;
  return 0;
}

/* An upper-case key (JOB_STATE, SLURM_STATES): a state table, checked as an item. */
static inline int golden__table_key(const char *k)
{
  for (const char *p = k; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || *p == '_'))
      return 0;
  return 1;
}

static inline void golden__run_item(const char *dir, const cJSON *c, const char *id,
                                    const cJSON *node, const struct golden_check *checks, int *used)
{
  size_t i;
  const cJSON *exp, *k;
  for (i = 0; checks[i].item != NULL; i++)
    if (strcmp(checks[i].item, id) == 0)
      break;
  if (checks[i].item == NULL)
    MU__FAIL("tests/golden/%s/case.json: item \"%s\" has no check: write one (its expectation as "
             "assertions) in the test file that runs this case",
             dir, id);
  used[i] = 1;
  golden__nseen = 0;
  golden__item = id;
  checks[i].fn(c, node);
  exp = cJSON_GetObjectItemCaseSensitive(node, "expected");
  if (cJSON_IsObject(exp)) {
    cJSON_ArrayForEach(k, exp)
    {
      size_t s;
      for (s = 0; s < golden__nseen && golden__seen[s] != k; s++)
        ;
      if (s == golden__nseen)
        MU__FAIL("tests/golden/%s: the check of \"%s\" does not read expected \"%s\"", dir, id,
                 k->string);
    }
  }
  fprintf(stderr, "# %s: %s: checked\n", dir, id);
}

/* Runs the check of every item of tests/golden/DIR/case.json (see the top of this file);
 * CHECKS ends with {NULL, NULL}. */
static inline void golden_case_run(const char *dir, const struct golden_check *checks)
{
  cJSON *c = golden_case_json(dir);
  const cJSON *k, *it;
  size_t n = 0, i;
  int *used;

  while (checks[n].item != NULL)
    n++;
  used = mu_calloc(n + 1, sizeof *used);
  if (cJSON_GetObjectItemCaseSensitive(c, "input") ||
      cJSON_GetObjectItemCaseSensitive(c, "expected_file"))
    golden__run_item(dir, c, "main", c, checks, used);
  cJSON_ArrayForEach(k, c)
  {
    if (strcmp(k->string, "subcases") == 0) {
      cJSON_ArrayForEach(it, k) golden__run_item(dir, c, golden_str(it, "name"), it, checks, used);
    } else if (strcmp(k->string, "extra_assertions") == 0) {
      cJSON_ArrayForEach(it, k)
      {
        char *id = mu_asprintf("extra_assertions.%s", it->string);
        golden__run_item(dir, c, id, it, checks, used);
        mu_free(id);
      }
    } else if (strcmp(k->string, "literal_assertions") == 0 ||
               strcmp(k->string, "behaviour_assertions") == 0) {
      cJSON_ArrayForEach(it, k)
      {
        if (!cJSON_IsString(it))
          MU__FAIL("tests/golden/%s: %s holds a non-string", dir, k->string);
        golden__run_item(dir, c, it->valuestring, it, checks, used);
      }
    } else if (strcmp(k->string, "rule") == 0 || golden__table_key(k->string)) {
      golden__run_item(dir, c, k->string, k, checks, used);
    } else if (!golden__plain_key(k->string)) {
      MU__FAIL("tests/golden/%s/case.json: key \"%s\" is neither checked nor known as a "
               "description (tests/unit/golden.h)",
               dir, k->string);
    }
  }
  for (i = 0; i < n; i++)
    if (!used[i])
      MU__FAIL("tests/golden/%s: the check \"%s\" matches no item of case.json (renamed?)", dir,
               checks[i].item);
  mu_free(used);
  cJSON_Delete(c);
}

/* Fails unless every tests/golden/torchx-* folder with a case.json whose name contains KIND
 * ("_k8s_", "_slurm_") is in DIRS (NULL-terminated), and every entry of DIRS exists: a new
 * case folder cannot go unchecked. */
static inline void golden_all_cases_listed(const char *kind, const char *const *dirs)
{
  char *tests = golden_tests_dir(), *golden = mu_asprintf("%s/golden", tests);
  DIR *d = opendir(golden);
  struct dirent *e;
  size_t i, ndirs = 0, found = 0;
  if (d == NULL)
    MU__FAIL("cannot open %s", golden);
  while (dirs[ndirs] != NULL)
    ndirs++;
  while ((e = readdir(d)) != NULL) {
    char *cj;
    struct stat st;
    if (strncmp(e->d_name, "torchx-", 7) != 0 || strstr(e->d_name, kind) == NULL)
      continue;
    cj = mu_asprintf("%s/%s/case.json", golden, e->d_name);
    if (stat(cj, &st) == 0) {
      for (i = 0; i < ndirs && strcmp(dirs[i], e->d_name) != 0; i++)
        ;
      if (i == ndirs)
        MU__FAIL("tests/golden/%s/case.json is run by no test: add it to the case list of the "
                 "test file for \"%s\" cases",
                 e->d_name, kind);
      found++;
    }
    mu_free(cj);
  }
  closedir(d);
  if (found != ndirs)
    MU__FAIL("%zu case folders listed for \"%s\", %zu found under %s", ndirs, kind, found, golden);
  mu_free(golden);
  mu_free(tests);
}

/* ------------------------------------------------------------------ stand-ins for tools */

/* A directory of stand-in programs, first on PATH for the rest of the test (each test runs in
 * its own process). A stand-in NAME appends its arguments (joined by ' ') to DIR/calls, saves
 * its stdin in DIR/NAME.stdin, prints DIR/NAME.out to stdout and DIR/NAME.err to stderr, and
 * exits with the number in DIR/NAME.rc (0 when absent).
 * Returns: the directory (mu_free), in the case's temporary directory, which the runner removes
 * when the case ends. */
static inline char *golden_tools_dir(void)
{
  char *dir = mu_asprintf("%s/tools-XXXXXX", mu_test_tmpdir()), *path;
  if (mkdtemp(dir) == NULL)
    MU__FAIL("mkdtemp failed");
  path = mu_asprintf("%s:%s", dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  setenv("PATH", path, 1);
  mu_free(path);
  return dir;
}

/* Creates (or resets) the stand-in NAME in DIR with this output and exit status. */
static inline void golden_tool(const char *dir, const char *name, const char *out, const char *err,
                               int rc)
{
  static const char script[] = "#!/bin/sh\n"
                               "d=$(dirname \"$0\"); n=$(basename \"$0\")\n"
                               "printf '%s\\n' \"$n $*\" >>\"$d/calls\"\n"
                               "cat >\"$d/$n.stdin\"\n"
                               "cat \"$d/$n.out\" 2>/dev/null\n"
                               "cat \"$d/$n.err\" >&2 2>/dev/null\n"
                               "exit \"$(cat \"$d/$n.rc\" 2>/dev/null || echo 0)\"\n";
  char *p = mu_asprintf("%s/%s", dir, name), *o = mu_asprintf("%s/%s.out", dir, name),
       *e = mu_asprintf("%s/%s.err", dir, name), *r = mu_asprintf("%s/%s.rc", dir, name),
       *rcs = mu_asprintf("%d\n", rc);
  ASSERT_EQ(mu_write_file_atomic(p, script, strlen(script), 0755, 0), 0);
  ASSERT_EQ(mu_write_file_atomic(o, out ? out : "", out ? strlen(out) : 0, 0644, 0), 0);
  ASSERT_EQ(mu_write_file_atomic(e, err ? err : "", err ? strlen(err) : 0, 0644, 0), 0);
  ASSERT_EQ(mu_write_file_atomic(r, rcs, strlen(rcs), 0644, 0), 0);
  mu_free(p);
  mu_free(o);
  mu_free(e);
  mu_free(r);
  mu_free(rcs);
}

/* What the stand-ins of DIR were called with, one line per call ("NAME ARGS"), and forgets it.
 * Returns: a new string (mu_free; "" when none was called). */
static inline char *golden_tool_calls(const char *dir)
{
  char *p = mu_asprintf("%s/calls", dir);
  struct mu_buf b = MU_BUF_INIT(1 << 20);
  mu_read_file(p, 1 << 20, &b); /* none: no call */
  unlink(p);
  mu_free(p);
  return mu_buf_detach(&b);
}

/* The stdin the stand-in NAME of DIR read last. Returns: a new string (mu_free). */
static inline char *golden_tool_stdin(const char *dir, const char *name)
{
  char *p = mu_asprintf("%s/%s.stdin", dir, name);
  struct mu_buf b = MU_BUF_INIT(16 << 20);
  if (mu_read_file(p, 16 << 20, &b) != 0)
    MU__FAIL("the stand-in %s read no stdin", name);
  mu_free(p);
  return mu_buf_detach(&b);
}

#endif
