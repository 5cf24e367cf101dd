/* Fixtures shared by the unit tests that compare against tests/golden/ (the TorchX cases and
 * recorded cluster output): reading a golden file and building the app of a case.json. The
 * functions are static inline so that a test file using only some of them does not warn. */
#ifndef MU_TEST_GOLDEN_H
#define MU_TEST_GOLDEN_H

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "alloc.h"
#include "job.h"
#include "task.h"

/* The contents of tests/golden/REL (REL may start with "../fixtures/"); fails the test when it
 * cannot be read. Returns: a NUL-terminated copy; caller frees with mu_free(). */
static inline char *golden_slurp(const char *rel)
{
  const char *f = __FILE__, *slash = strrchr(f, '/');
  char *path = mu_asprintf("%.*s/../golden/%s", (int)(slash - f), f, rel), *data;
  FILE *fp = fopen(path, "rb");
  long n;
  if (fp == NULL)
    MU__FAIL("cannot open %s", path);
  fseek(fp, 0, SEEK_END);
  n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  data = mu_malloc((size_t)n + 1);
  if (fread(data, 1, (size_t)n, fp) != (size_t)n)
    MU__FAIL("cannot read %s", path);
  data[n] = '\0';
  fclose(fp);
  mu_free(path);
  return data;
}

/* The parsed tests/golden/DIR/case.json; fails the test when it does not parse.
 * Returns: a tree; caller frees with cJSON_Delete(). */
static inline cJSON *golden_case_json(const char *dir)
{
  char *rel = mu_asprintf("%s/case.json", dir), *txt = golden_slurp(rel);
  cJSON *c = cJSON_Parse(txt);
  ASSERT_NOT_NULL(c);
  mu_free(rel);
  mu_free(txt);
  return c;
}

/* The app of a JSON app spec (the form mu_app_to_json writes); fails the test when it does not
 * load. Returns: a new app; caller frees with mu_app_free(). */
static inline struct mu_app *golden_app_from(const cJSON *app_json)
{
  char *s = cJSON_PrintUnformatted(app_json);
  struct mu_app *app = NULL;
  ASSERT_EQ(mu_app_from_json(s, &app), 0);
  cJSON_free(s);
  return app;
}

/* The app of tests/golden/DIR/case.json ("input"."app").
 * Returns: a new app; caller frees with mu_app_free(). */
static inline struct mu_app *golden_case_app(const char *dir)
{
  cJSON *c = golden_case_json(dir);
  struct mu_app *app = golden_app_from(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "input"), "app"));
  cJSON_Delete(c);
  return app;
}

#endif
