/* muster agent: which rendezvous, from torchrun's options. The backends are the client's table
 * (client/backends.h); the agent adds its own two ways: --standalone (an embedded musterd on a
 * free loopback port) and --rdzv-backend static (node rank 0's agent serves an embedded
 * musterd at --master-addr:--master-port, as torchrun's static rendezvous has node rank 0 host
 * the store). Everything here returns its error in words; cmd/cmd_agent.c prints. */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "agent.h"
#include "alloc.h"
#include "client/backends.h"
#include "opts.h"
#include "suggest.h"

#define STATIC_HELP                                                                                \
  "node rank 0's agent serves it (torchrun's static rendezvous; the default without\n"             \
  "            --rdzv-endpoint): --node-rank R --master-addr HOST --master-port PORT"

void mu_agent_rdzv_names(struct mu_buf *out)
{
  mu_client_backend_names(out);
  mu_buf_puts(out, ", static");
}

void mu_agent_rdzv_help(struct mu_buf *out)
{
  mu_buf_puts(out, "rendezvous backends (--rdzv-backend NAME):\n");
  for (const struct mu_client_backend *b = mu_client_backends; b->name != NULL; b++)
    mu_buf_printf(out, "  %-9s %s\n  %-9s --rdzv-endpoint %s%s%s\n", b->name, b->help, "",
                  b->scheme != NULL ? b->scheme : "", b->scheme != NULL ? "://" : "",
                  b->endpoint_form);
  mu_buf_printf(out, "  %-9s %s\n", "static", STATIC_HELP);
}

void mu_agent_rdzv_release(struct mu_agent_rdzv *r)
{
  if (r == NULL)
    return;
  mu_agent_standalone_stop(r->server);
  mu_free(r->endpoint);
  memset(r, 0, sizeof(*r));
}

static int valid_run_id(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > 128)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

/* "HOST:PORT" split at the last colon. Returns: 0, or -1 when it is not that. */
static int split_hostport(const char *s, char *host, size_t n, long *port)
{
  const char *colon = strrchr(s, ':');
  if (colon == NULL || colon == s || (size_t)(colon - s) >= n ||
      mu_parse_long(colon + 1, 0, 65535, port) != 0)
    return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  return 0;
}

static int is_loopback(const char *host)
{
  return strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
         strcmp(host, "::1") == 0;
}

static void say(const struct mu_agent_config *cfg, const char *text)
{
  if (cfg->report != NULL)
    cfg->report(cfg->report_data, MU_AGENT_PROGRESS, text);
}

/* The row --rdzv-backend names (or the endpoint picks); *is_static for "static".
 * Returns: 0, or MU_AGENT_EXIT_USAGE with the words in err. */
static int pick_backend(const struct mu_agent_rdzv_args *a, const struct mu_client_backend **b,
                        int *is_static, struct mu_buf *err)
{
  const char *name = a->backend;
  *b = NULL;
  *is_static = name != NULL ? strcmp(name, "static") == 0 : a->endpoint == NULL;
  if (*is_static)
    return 0;
  *b = name != NULL ? mu_client_backend_find(name) : mu_client_backend_of(a->endpoint);
  if (*b != NULL)
    return 0;
  struct mu_suggest sg;
  mu_suggest_init(&sg, name);
  for (const struct mu_client_backend *r = mu_client_backends; r->name != NULL; r++) {
    mu_suggest_add(&sg, r->name);
    for (const char *const *al = r->aliases; al != NULL && *al != NULL; al++)
      mu_suggest_add(&sg, *al);
  }
  mu_suggest_add(&sg, "static");
  const char *best = mu_suggest_best(&sg);
  mu_buf_printf(err, "--rdzv-backend '%s' is not known%s%s%s; use ", name,
                best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
  mu_agent_rdzv_names(err);
  return MU_AGENT_EXIT_USAGE;
}

/* torchrun's static rendezvous: node rank 0's agent serves an embedded musterd; the others
 * reach it at --master-addr:--master-port (or --rdzv-endpoint HOST:PORT).
 * Returns: 0, or an exit code with the words in err. */
static int static_rdzv(const struct mu_agent_rdzv_args *a, struct mu_agent_config *cfg,
                       struct mu_agent_rdzv *out, struct mu_buf *err)
{
  char host[256], ep[300];
  long node_rank = 0, port = 29500;
  if (cfg->min_nodes != cfg->max_nodes) {
    mu_buf_printf(err,
                  "--rdzv-backend static needs a fixed --nnodes N, not %d:%d; an elastic "
                  "range needs a musterd: --rdzv-endpoint HOST:PORT --rdzv-id ID",
                  cfg->min_nodes, cfg->max_nodes);
    return MU_AGENT_EXIT_USAGE;
  }
  if (a->node_rank != NULL && mu_parse_long(a->node_rank, 0, cfg->max_nodes - 1L, &node_rank)) {
    mu_buf_printf(err, "--node-rank '%s': expected a number from 0 to %d (--nnodes %d)",
                  a->node_rank, cfg->max_nodes - 1, cfg->max_nodes);
    return MU_AGENT_EXIT_USAGE;
  }
  if (a->master_port != NULL && mu_parse_long(a->master_port, 1, 65535, &port) != 0) {
    mu_buf_printf(err, "--master-port '%s': expected a port from 1 to 65535", a->master_port);
    return MU_AGENT_EXIT_USAGE;
  }
  /* One node needs no agreed port: the kernel picks one unless --master-port was given. */
  if (a->master_port == NULL && cfg->max_nodes == 1)
    port = 0;
  snprintf(host, sizeof(host), "%s", a->master_addr != NULL ? a->master_addr : "127.0.0.1");
  if (a->endpoint != NULL && split_hostport(a->endpoint, host, sizeof(host), &port) != 0) {
    mu_buf_printf(err, "--rdzv-endpoint '%s': expected HOST:PORT", a->endpoint);
    return MU_AGENT_EXIT_USAGE;
  }
  cfg->static_rank = (int)node_rank;
  cfg->master_addr = a->master_addr != NULL ? a->master_addr : "127.0.0.1";
  snprintf(ep, sizeof(ep), "%s:%ld", host, port);
  if (node_rank == 0) {
    int rc = mu_agent_standalone_listen(&out->server, is_loopback(host) ? "127.0.0.1" : "0.0.0.0",
                                        (int)port, ep, sizeof(ep));
    if (rc != 0) {
      mu_buf_printf(err,
                    "static rendezvous: node rank 0 cannot listen on port %ld: %s; pick "
                    "another --master-port",
                    port, mu_strerror(rc));
      return MU_AGENT_EXIT_RENDEZVOUS;
    }
    char *line = mu_asprintf("static rendezvous: node rank 0 serves it on %s", ep);
    say(cfg, line);
    mu_free(line);
  }
  out->endpoint = mu_strdup(ep);
  return 0;
}

/* --standalone: an embedded musterd on a free loopback port. */
static int standalone(struct mu_agent_config *cfg, struct mu_agent_rdzv *out, struct mu_buf *err)
{
  char ep[300];
  int rc = mu_agent_standalone_start(&out->server, ep, sizeof(ep));
  if (rc != 0) {
    mu_buf_printf(err, "--standalone: cannot start the embedded musterd: %s", mu_strerror(rc));
    return MU_AGENT_EXIT_RENDEZVOUS;
  }
  char *line = mu_asprintf("standalone: embedded musterd on %s", ep);
  say(cfg, line);
  mu_free(line);
  out->endpoint = mu_strdup(ep);
  return 0;
}

/* A backend of the table at --rdzv-endpoint, in the form its messages and workers show. */
static int backend_endpoint(const struct mu_agent_rdzv_args *a, const struct mu_client_backend *b,
                            struct mu_agent_rdzv *out, struct mu_buf *err)
{
  struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
  int code = 0;
  if (a->endpoint == NULL) {
    mu_buf_printf(err, "--rdzv-endpoint %s is required (--rdzv-backend %s), or use --standalone",
                  b->endpoint_form, b->name);
    code = MU_AGENT_EXIT_USAGE;
  } else if (mu_client_backend_endpoint(b, a->endpoint, &out->endpoint, &why) != 0) {
    mu_buf_printf(err, "--rdzv-endpoint: %s; with --rdzv-backend %s give %s", mu_buf_str(&why),
                  b->name, b->endpoint_form);
    if (b->scheme != NULL)
      mu_buf_printf(err, ", e.g. %s://h1:2379,h2:2379", b->scheme);
    code = MU_AGENT_EXIT_USAGE;
  }
  mu_buf_release(&why);
  return code;
}

int mu_agent_rdzv_resolve(const struct mu_agent_rdzv_args *a, struct mu_agent_config *cfg,
                          struct mu_agent_rdzv *out, struct mu_buf *err)
{
  const struct mu_client_backend *b = NULL;
  int is_static = 0, code = 0;
  memset(out, 0, sizeof(*out));
  /* torchrun's default --rdzv-id is "none"; its --standalone makes one up */
  const char *run_id = a->run_id != NULL ? a->run_id : a->standalone ? "standalone" : "none";
  if (!valid_run_id(run_id)) {
    mu_buf_printf(err, "--rdzv-id '%s': use 1-128 characters from A-Z a-z 0-9 . _ -", run_id);
    return MU_AGENT_EXIT_USAGE;
  }
  cfg->run_id = run_id;
  /* --standalone wins (as torchrun's, it ignores backend, endpoint and id) */
  if (a->standalone)
    code = standalone(cfg, out, err);
  else
    code = pick_backend(a, &b, &is_static, err);
  if (code == 0 && is_static)
    code = static_rdzv(a, cfg, out, err);
  else if (code == 0 && b != NULL)
    code = backend_endpoint(a, b, out, err);
  cfg->backend = b;
  cfg->endpoint = out->endpoint;
  return code;
}
