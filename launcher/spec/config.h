/* Scheduler configuration: `-cfg k=v,...` strings and `.musterconfig` files (INI, as TorchX's
 * .torchxconfig), resolved against a scheduler's declared runopts.
 *
 * Precedence (TorchX's): -cfg on the command line > the `[<scheduler>]` section of the config
 * files > the runopt's default. Files: only $MUSTERCONFIG when it is set, else
 * $HOME/.musterconfig then ./.musterconfig; a key in an earlier file is never overridden by a
 * later one. Sections: `[cli:run]` (scheduler=, component=), `[<scheduler>]` (runopts),
 * `[component:<name>]` (component argument defaults, as strings). The literal `None` unsets.
 * A .torchxconfig is read when there is no .musterconfig (mu_config_load()).
 */
#ifndef MU_CONFIG_H
#define MU_CONFIG_H

#include "buf.h"
#include "job.h"
#include "strvec.h"

/* A runopt declaration: `muster runopts SCHED` prints these; -cfg keys are checked
 * against them (unknown key -> error with the closest name). */
enum mu_runopt_type {
  MU_RUNOPT_STR = 0,
  MU_RUNOPT_INT,
  MU_RUNOPT_FLOAT,
  MU_RUNOPT_BOOL,
  MU_RUNOPT_LIST, /* comma/semicolon separated strings */
  MU_RUNOPT_MAP,  /* k:v items */
};

struct mu_runopt {
  const char *name;
  enum mu_runopt_type type;
  const char *def; /* default as text, NULL for none */
  int required;
  const char *help;
};

/* A resolved scheduler configuration: every declared runopt, in text form (NULL = unset). */
struct mu_cfg {
  struct mu_kvlist values;
};

/* Returns: the value of key in cfg (NULL when unset). Ownership: borrowed. */
const char *mu_cfg_get(const struct mu_cfg *cfg, const char *key);
/* Returns: 1 when the bool runopt key is "true"/"1"/"yes"/"on" (case-insensitive), else 0. */
int mu_cfg_get_bool(const struct mu_cfg *cfg, const char *key);
void mu_cfg_release(struct mu_cfg *cfg);

/* One value read from a file, with where it came from ("path:line"). */
struct mu_config_entry {
  char *section;
  char *key;
  char *value; /* NULL for None */
  char *where;
};

struct mu_config {
  struct mu_config_entry *v;
  size_t n;
  size_t cap;
  char *torchx; /* the .torchxconfig read in place of a .musterconfig, or NULL */
};
#define MU_CONFIG_INIT                                                                             \
  {                                                                                                \
    NULL, 0, 0, NULL                                                                               \
  }

/* Parses INI text into c; `where` names the source in messages. Keys already present in the
 * same section are kept (earlier files win). Returns: 0, or MU_EPARSE with "path:line: ..." in
 * err. */
int mu_config_parse(struct mu_config *c, const char *text, const char *where, struct mu_buf *err);
/* Loads the files in precedence order (see above). A missing file is not an error. When none
 * of them exists (and $MUSTERCONFIG is unset), TorchX's are read instead, by TorchX's rules:
 * only $TORCHXCONFIG when set, else $HOME/.torchxconfig then ./.torchxconfig; c->torchx then
 * names the first one read (the caller says so to the user).
 * Returns: 0, or MU_EPARSE / a negative errno with the message in err. */
int mu_config_load(struct mu_config *c, struct mu_buf *err);
/* Returns: the entry or NULL. Ownership: borrowed. */
const struct mu_config_entry *mu_config_find(const struct mu_config *c, const char *section,
                                             const char *key);
void mu_config_release(struct mu_config *c);

/* Splits a `-cfg` string into raw key/value pairs with TorchX's to_dict rules: pairs separated
 * by ',' or ';', the LAST ',' or ';' before the next `key=` delimits them ("FOO=v1,v2,BAR=v3"
 * gives FOO="v1,v2"), single or double quotes protect '=', ',' and ';'.
 * Returns: 0, or MU_EINVAL with the reason in err. Ownership: appends copies to out. */
int mu_cfg_split(const char *s, struct mu_kvlist *out, struct mu_buf *err);

/* Resolves the scheduler configuration: cli (from mu_cfg_split) over the file's [sched]
 * section over defaults. Every value is checked against its runopt type and normalised to
 * text (lists joined by ',', maps as "k:v,k2:v2", bools "true"/"false").
 * Returns: 0; MU_EINVAL for an unknown key (err names it and the closest runopt), a bad value
 * or a missing required runopt. Ownership: out is the caller's (mu_cfg_release). */
int mu_cfg_resolve(const char *sched, const struct mu_runopt *runopts, const struct mu_kvlist *cli,
                   const struct mu_config *file, struct mu_cfg *out, struct mu_buf *err);

/* Splits a list runopt value on ',' and ';' outside quotes into trimmed non-empty items; an item in
 * matching quotes loses them and is split again inside ("a=b:NoSchedule;c=d";spot gives three
 * items). Appends to out. */
void mu_cfg_split_list(const char *v, struct mu_strvec *out);

/* The `rdzv` runopt, one vocabulary for every scheduler (docs/cli.md, "-cfg rdzv"):
 *   auto      a musterd for the job when a role uses ${rdzv_endpoint} (the default)
 *   job       always a musterd for the job (`always` is the old local spelling)
 *   none      no musterd for the job (`never` is the old local spelling); a role that uses
 *             ${rdzv_endpoint} is then an error
 *   HOST:PORT an existing musterd (or etcd with the v2 API) that the job uses
 *   SCHEME://...  a rendezvous backend's endpoint (etcd-v3://H1:P,H2:P): the forms are the
 *             rows of the client's backend table (client/include/client/backends.h). */
struct mu_rdzv_choice {
  int own;          /* 1: the job runs its own musterd */
  char *endpoint;   /* an existing service ("HOST:PORT", or a form's full text), else NULL */
  const char *form; /* the endpoint's form: "" for HOST:PORT, else its scheme ("etcd-v3") */
};

/* Reads cfg's `rdzv` (unset = auto) for app. Returns: 0, or MU_EINVAL with the word, the closest
 * one and the vocabulary in err. Ownership: out->endpoint is the caller's (mu_free). */
int mu_cfg_rdzv(const struct mu_cfg *cfg, const struct mu_app *app, struct mu_rdzv_choice *out,
                struct mu_buf *err);

/* Who may use the job's rendezvous (docs/security.md, "A job's rendezvous is private"), from
 * the runopts every scheduler that starts a musterd for the job declares:
 *   rdzv_auth=auto    (the default) the job's own musterd requires a token that `muster run`
 *                     makes for the job (or, with rdzv_token_file, the user's) and hands to
 *                     the job alone, in a 0600 file; unless a role runs torchrun with an etcd
 *                     backend, which sends none: then it is open, and why_open says so
 *   rdzv_auth=token   always the token (a torchrun etcd role is then an error)
 *   rdzv_auth=none    open to anyone who reaches its port
 *   rdzv_token_file=F the first line of F is the token: of the existing musterd of
 *                     rdzv=HOST:PORT (the agents send it), or of the job's own musterd
 *   rdzv_tls=DIR      the job's own musterd serves HTTPS (see tls_dir) */
struct mu_rdzv_auth {
  int open;         /* 1: the job's own musterd requires nothing */
  char *why_open;   /* open by rdzv_auth=auto: the sentence that says why, else NULL */
  char *token_file; /* rdzv_token_file as an absolute path, else NULL */
  /* rdzv_tls=DIR (the job's own musterd only), as an absolute path, else NULL: the musterd
   * serves HTTPS with DIR/server.pem and DIR/server.key, the agents check it against
   * DIR/ca.pem; with DIR/client.pem and DIR/client.key as well (tls_clients), musterd asks
   * for client certificates signed by ca.pem and the agents present that one. */
  char *tls_dir;
  int tls_clients;
};

/* Reads rdzv_auth and rdzv_token_file for app, whose rendezvous rz chose. Returns: 0, or
 * MU_EINVAL with the runopt and the fix in err. Ownership: out->token_file, out->why_open and
 * out->tls_dir are the caller's (mu_free). */
int mu_cfg_rdzv_auth(const struct mu_cfg *cfg, const struct mu_app *app,
                     const struct mu_rdzv_choice *rz, struct mu_rdzv_auth *out,
                     struct mu_buf *err);

#endif
