/* Tests for launcher/agent/: nnodes / rdzv_conf parsing, the rendezvous backend on musterd, the
 * worker environment and the TORCHELASTIC_ERROR_FILE reader. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "muster/client.h"
#include "muster/errno.h"

#include "agent.h"
#include "alloc.h"
#include "buf.h"
#include "client/backends.h"
#include "strvec.h"
#include "task.h"

static const char *env_get(const struct mu_strvec *sv, const char *name)
{
  size_t n = strlen(name);
  const char *hit = NULL;
  for (size_t i = 0; i < sv->n; i++)
    if (strncmp(sv->v[i], name, n) == 0 && sv->v[i][n] == '=') {
      ASSERT_NULL(hit); /* each variable once */
      hit = sv->v[i] + n + 1;
    }
  return hit;
}

TEST(agent__nnodes)
{
  int a = 0, b = 0;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  ASSERT_EQ(mu_agent_parse_nnodes("4", &a, &b, &err), 0);
  ASSERT_EQ(a, 4);
  ASSERT_EQ(b, 4);
  ASSERT_EQ(mu_agent_parse_nnodes("2:4", &a, &b, &err), 0);
  ASSERT_EQ(a, 2);
  ASSERT_EQ(b, 4);
  ASSERT_EQ(err.len, 0);
  ASSERT_EQ(mu_agent_parse_nnodes("4:2", &a, &b, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "below MIN") != NULL);
  mu_buf_clear(&err);
  ASSERT_EQ(mu_agent_parse_nnodes("0", &a, &b, &err), MU_EINVAL);
  ASSERT_EQ(mu_agent_parse_nnodes("two", &a, &b, &err), MU_EINVAL);
  mu_buf_clear(&err);
  ASSERT_EQ(mu_agent_parse_nnodes(":3", &a, &b, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "MIN:MAX") != NULL);
  mu_buf_release(&err);
}

TEST(agent__rdzv_conf)
{
  struct mu_agent_config cfg;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  mu_agent_config_init(&cfg);
  ASSERT_EQ(mu_agent_parse_rdzv_conf("join_timeout=30,last_call_timeout=0.5,lease_ttl=2,"
                                     "read_timeout=60,is_host=1",
                                     &cfg, &err),
            0);
  ASSERT(cfg.join_timeout_s == 30);
  ASSERT(cfg.last_call_s == 0.5);
  ASSERT(cfg.lease_ttl_s == 2);
  ASSERT_EQ(mu_agent_parse_rdzv_conf("bogus=1", &cfg, &err), MU_EINVAL);
  ASSERT(strstr(mu_buf_str(&err), "'bogus'") != NULL);
  ASSERT_EQ(mu_agent_parse_rdzv_conf("join_timeout=soon", &cfg, &err), MU_EINVAL);
  ASSERT_EQ(mu_agent_parse_rdzv_conf("novalue", &cfg, &err), MU_EINVAL);
  mu_buf_release(&err);
}

/* The rendezvous as the agent reaches it: the backend table's musterd row (by a torchrun alias),
 * a client opened on it against a real embedded musterd: what the agent calls (join,
 * heartbeat, watch, leave, shutdown) and what a backend offers the workers (barrier, KV), with
 * the words of each error in mu_client_errmsg(). */
TEST(agent__client_backend_musterd)
{
  const struct mu_client_backend *b = mu_client_backend_find("etcd-v2");
  struct mu_agent_standalone *srv = NULL;
  struct mu_client *r = NULL;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  char ep[64], addr[64];
  ASSERT_NOT_NULL(b);
  ASSERT_STR_EQ(b->name, "muster");
  ASSERT(mu_client_backend_of("127.0.0.1:1") == b);
  ASSERT_STR_EQ(mu_client_backend_of("etcd-v3://h:1")->name, "etcd-v3");
  ASSERT_STR_EQ(mu_client_backend_find("etcd3")->name, "etcd-v3");
  ASSERT_NULL(mu_client_backend_find("static")); /* the agent's own, not a client backend */
  ASSERT_EQ(mu_client_open(b, "no-port", &r, &err), MU_EINVAL);
  ASSERT_NULL(r);
  ASSERT(strstr(mu_buf_str(&err), "'no-port'") != NULL);
  ASSERT_EQ(mu_agent_standalone_start(&srv, ep, sizeof(ep)), 0);
  ASSERT_EQ(mu_client_open(b, ep, &r, &err), 0);
  ASSERT_EQ(mu_client_local_addr(r, addr, sizeof(addr)), MU_ENOENT); /* nothing connected yet */

  struct mu_join_opts o = {"n1", "127.0.0.1", 2, 29999, 1, 1, 0, 5000, 3000, 0, 0};
  struct mu_round round;
  ASSERT_EQ(mu_client_join(r, "be", &o, &round), 0);
  ASSERT_EQ(round.round, 1);
  ASSERT_EQ(round.world_size, 2);
  mu_round_release(&round);
  ASSERT_EQ(mu_client_local_addr(r, addr, sizeof(addr)), 0);
  ASSERT_STR_EQ(addr, "127.0.0.1");
  ASSERT_EQ(mu_client_heartbeat(r, "be", "n1", NULL, NULL), 0);
  ASSERT_EQ(mu_client_heartbeat(r, "be", "stranger", NULL, NULL), MU_ENOENT);
  ASSERT(mu_client_errmsg(r)[0] != '\0');
  enum mu_watch_event ev = MU_WATCH_BROKEN;
  ASSERT_EQ(mu_client_watch(r, "be", "n1", 1, 100, &ev, NULL), 0);
  ASSERT_EQ(ev, MU_WATCH_NONE);

  char *val = NULL;
  size_t len = 0;
  long gen = 0;
  ASSERT_EQ(mu_client_kv_get(r, "be", "k", 0, &val, &len), MU_ENOENT);
  ASSERT_EQ(mu_client_kv_put(r, "be", "k", "v1", 2, NULL), 0);
  ASSERT_EQ(mu_client_kv_get(r, "be", "k", 0, &val, &len), 0);
  ASSERT_EQ(len, 2);
  ASSERT_STR_EQ(val, "v1");
  mu_free(val);
  ASSERT_EQ(mu_client_barrier(r, "be", "b", 1, "me", 1000, &gen), 0);
  ASSERT_EQ(gen, 1);
  ASSERT_EQ(mu_client_barrier(r, "be", "b2", 2, "me", 100, NULL), MU_ETIMEDOUT);

  /* Leaving as failed breaks the round; shutting the run down is final for everyone. */
  ASSERT_EQ(mu_client_leave(r, "be", "n1", 0, "unit test"), 0);
  ASSERT_EQ(mu_client_shutdown(r, "be", "unit test"), 0);
  ASSERT_EQ(mu_client_join(r, "be", &o, &round), MU_ESHUT);
  ASSERT(mu_client_errmsg(r)[0] != '\0');
  mu_client_free(r);
  mu_client_free(NULL);
  mu_agent_standalone_stop(srv);
  mu_buf_release(&err);
}

TEST(agent__worker_env)
{
  struct mu_agent_config cfg;
  mu_agent_config_init(&cfg);
  cfg.run_id = "job1";
  cfg.role = "trainer";
  cfg.max_restarts = 3;
  struct mu_round r;
  memset(&r, 0, sizeof(r));
  r.round = 7;
  r.node_rank = 1;
  r.nnodes = 3;
  r.rank_offset = 4;
  r.world_size = 10;
  r.local_world_size = 4;
  r.master_addr = (char *)"10.0.0.1";
  r.master_port = 29500;
  char a[] = "PATH=/usr/bin", b[] = "RANK=99", c[] = "HOME=/root";
  char *base[] = {a, b, c, NULL};
  struct mu_strvec env = MU_STRVEC_INIT;
  mu_agent_worker_env(&cfg, "127.0.0.1:2379", &r, 2, 1, "/tmp/e.json", base, &env);
  ASSERT_STR_EQ(env_get(&env, "PATH"), "/usr/bin");
  ASSERT_STR_EQ(env_get(&env, "RANK"), "6");
  ASSERT_STR_EQ(env_get(&env, "LOCAL_RANK"), "2");
  ASSERT_STR_EQ(env_get(&env, "WORLD_SIZE"), "10");
  ASSERT_STR_EQ(env_get(&env, "LOCAL_WORLD_SIZE"), "4");
  ASSERT_STR_EQ(env_get(&env, "GROUP_RANK"), "1");
  ASSERT_STR_EQ(env_get(&env, "GROUP_WORLD_SIZE"), "3");
  ASSERT_STR_EQ(env_get(&env, "ROLE_RANK"), "6");
  ASSERT_STR_EQ(env_get(&env, "ROLE_WORLD_SIZE"), "10");
  ASSERT_STR_EQ(env_get(&env, "ROLE_NAME"), "trainer");
  ASSERT_STR_EQ(env_get(&env, "MASTER_ADDR"), "10.0.0.1");
  ASSERT_STR_EQ(env_get(&env, "MASTER_PORT"), "29500");
  ASSERT_STR_EQ(env_get(&env, "TORCHELASTIC_RESTART_COUNT"), "1");
  ASSERT_STR_EQ(env_get(&env, "TORCHELASTIC_MAX_RESTARTS"), "3");
  ASSERT_STR_EQ(env_get(&env, "TORCHELASTIC_RUN_ID"), "job1");
  ASSERT_STR_EQ(env_get(&env, "TORCHELASTIC_ERROR_FILE"), "/tmp/e.json");
  ASSERT_STR_EQ(env_get(&env, "OMP_NUM_THREADS"), "1");
  ASSERT_STR_EQ(env_get(&env, "MUSTER_RDZV_ENDPOINT"), "127.0.0.1:2379");
  ASSERT_STR_EQ(env_get(&env, "MUSTER_RUN_ID"), "job1");
  ASSERT_STR_EQ(env_get(&env, "MUSTER_ROUND"), "7");
  mu_strvec_release(&env);
  /* A user's OMP_NUM_THREADS is kept. */
  char d[] = "OMP_NUM_THREADS=8";
  char *base2[] = {d, NULL};
  mu_agent_worker_env(&cfg, "h:1", &r, 0, 0, NULL, base2, &env);
  ASSERT_STR_EQ(env_get(&env, "OMP_NUM_THREADS"), "8");
  ASSERT_NULL(env_get(&env, "TORCHELASTIC_ERROR_FILE"));
  ASSERT_STR_EQ(env_get(&env, "TORCHELASTIC_USE_AGENT_STORE"), "False");
  ASSERT_STR_EQ(env_get(&env, "NCCL_ASYNC_ERROR_HANDLING"), "1");
  mu_strvec_release(&env);
  /* As torchrun: one worker per node gets no OMP_NUM_THREADS; a user's NCCL setting stays. */
  char e[] = "NCCL_ASYNC_ERROR_HANDLING=0";
  char *base3[] = {e, NULL};
  r.local_world_size = 1;
  mu_agent_worker_env(&cfg, "h:1", &r, 0, 0, NULL, base3, &env);
  ASSERT_NULL(env_get(&env, "OMP_NUM_THREADS"));
  ASSERT_STR_EQ(env_get(&env, "NCCL_ASYNC_ERROR_HANDLING"), "0");
  /* torchrun 2.x's names beside the old ones */
  ASSERT_STR_EQ(env_get(&env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
  ASSERT_STR_EQ(env_get(&env, "TORCHELASTIC_SIGNALS_TO_HANDLE"), "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  ASSERT_STR_EQ(env_get(&env, "LOCAL_RANK"), "0");
  mu_strvec_release(&env);
  /* --virtual-local-rank: LOCAL_RANK 0 and the worker's one device of the agent's list; a
   * user's TORCH_NCCL_ASYNC_ERROR_HANDLING and --signals-to-handle are passed on */
  char f[] = "CUDA_VISIBLE_DEVICES=4,5,6", g[] = "TORCH_NCCL_ASYNC_ERROR_HANDLING=3";
  char *base4[] = {f, g, NULL};
  cfg.virtual_local_rank = 1;
  cfg.signals_to_handle = "SIGTERM,SIGUSR1";
  mu_agent_worker_env(&cfg, "h:1", &r, 2, 0, NULL, base4, &env);
  ASSERT_STR_EQ(env_get(&env, "LOCAL_RANK"), "0");
  ASSERT_STR_EQ(env_get(&env, "CUDA_VISIBLE_DEVICES"), "6");
  ASSERT_STR_EQ(env_get(&env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");
  ASSERT_STR_EQ(env_get(&env, "TORCHELASTIC_SIGNALS_TO_HANDLE"), "SIGTERM,SIGUSR1");
  mu_strvec_release(&env);
  char *base5[] = {NULL};
  mu_agent_worker_env(&cfg, "h:1", &r, 1, 0, NULL, base5, &env);
  ASSERT_STR_EQ(env_get(&env, "CUDA_VISIBLE_DEVICES"), "1");
  mu_strvec_release(&env);
}

TEST(agent__parse_std)
{
  struct mu_buf err = MU_BUF_INIT(1024);
  int m = -1;
  ASSERT_EQ(mu_agent_parse_std("3", 5, &m, &err), 0);
  ASSERT_EQ(m, 3);
  ASSERT_EQ(mu_agent_parse_std("0:1,1:2", 1, &m, &err), 0);
  ASSERT_EQ(m, 2);
  ASSERT_EQ(mu_agent_parse_std("0:1,1:2", 2, &m, &err), 0);
  ASSERT_EQ(m, 0);
  ASSERT_EQ(mu_agent_parse_std("4", 0, &m, &err), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "expected 0 (none)"));
  mu_buf_clear(&err);
  ASSERT_EQ(mu_agent_parse_std("0:1,x", 0, &m, &err), MU_EINVAL);
  mu_buf_release(&err);
  /* The console: --log-dir alone is quiet; --redirects 1 hides stdout only; --tee shows it. */
  struct mu_agent_config cfg;
  mu_agent_config_init(&cfg);
  ASSERT_EQ(mu_agent_console(&cfg, 0, 1), 1);
  cfg.log_dir = "/tmp";
  ASSERT_EQ(mu_agent_console(&cfg, 0, 1), 0);
  cfg.redirects_spec = "1";
  ASSERT_EQ(mu_agent_console(&cfg, 0, 1), 0);
  ASSERT_EQ(mu_agent_console(&cfg, 0, 2), 1);
  cfg.tee_spec = "0:1";
  ASSERT_EQ(mu_agent_console(&cfg, 0, 1), 1);
  ASSERT_EQ(mu_agent_console(&cfg, 1, 1), 0);
}

static void write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  ASSERT_NOT_NULL(f);
  fputs(text, f);
  fclose(f);
}

TEST(agent__error_file_summary)
{
  char path[] = "/tmp/mu-test-errfile-XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  close(fd);
  struct mu_buf out = MU_BUF_INIT(1 << 16);
  write_file(path, "{\"message\": {\"message\": \"ValueError: boom\\nline 2\\nline 3\", "
                   "\"extraInfo\": {\"py_callstack\": \"Traceback...\", \"timestamp\": "
                   "\"1700000000\"}}}");
  ASSERT_EQ(mu_agent_error_file_summary(path, 2, "  | ", &out), 0);
  ASSERT_STR_EQ(mu_buf_str(&out), "  | ValueError: boom\n  | line 2\n  | ...\n"
                                  "  | (timestamp 1700000000)\n");
  mu_buf_clear(&out);
  write_file(path, "{\"message\": \"plain message\"}");
  ASSERT_EQ(mu_agent_error_file_summary(path, 5, "", &out), 0);
  ASSERT_STR_EQ(mu_buf_str(&out), "plain message\n");
  mu_buf_clear(&out);
  write_file(path, "not json at all\n");
  ASSERT_EQ(mu_agent_error_file_summary(path, 5, "> ", &out), 0);
  ASSERT_STR_EQ(mu_buf_str(&out), "> not json at all\n");
  write_file(path, "");
  ASSERT_EQ(mu_agent_error_file_summary(path, 5, "", &out), MU_ENOENT);
  unlink(path);
  ASSERT_EQ(mu_agent_error_file_summary(path, 5, "", &out), MU_ENOENT);
  mu_buf_release(&out);
}

TEST(agent__progress_env)
{
  struct mu_agent_config cfg;
  mu_agent_config_init(&cfg);
  struct mu_strvec env = MU_STRVEC_INIT;
  char *base[] = {(char *)"PATH=/bin", NULL};
  mu_agent_progress_env(&cfg, "/t/a/0/heartbeat", base, &env);
  ASSERT_STR_EQ(env_get(&env, "MUSTER_HEARTBEAT_FILE"), "/t/a/0/heartbeat");
  ASSERT_NULL(env_get(&env, "PYTHONFAULTHANDLER")); /* no hang watch: no stacks asked for */
  mu_strvec_release(&env);
  cfg.hang_timeout_s = 4;
  mu_agent_progress_env(&cfg, "/t/a/0/heartbeat", base, &env);
  ASSERT_STR_EQ(env_get(&env, "PYTHONFAULTHANDLER"), "1");
  mu_strvec_release(&env);
  char *own[] = {(char *)"PYTHONFAULTHANDLER=0", NULL}; /* the user's own setting stays */
  mu_agent_progress_env(&cfg, "/h", own, &env);
  ASSERT_NULL(env_get(&env, "PYTHONFAULTHANDLER"));
  mu_strvec_release(&env);
  /* an inherited MUSTER_HEARTBEAT_FILE (a nested agent) is the agent's own */
  struct mu_round r;
  memset(&r, 0, sizeof(r));
  r.world_size = r.local_world_size = r.nnodes = 1;
  cfg.run_id = "j";
  char *inh[] = {(char *)"MUSTER_HEARTBEAT_FILE=/old", NULL};
  mu_agent_worker_env(&cfg, "h:1", &r, 0, 0, NULL, inh, &env);
  mu_agent_progress_env(&cfg, "/new", inh, &env);
  ASSERT_STR_EQ(env_get(&env, "MUSTER_HEARTBEAT_FILE"), "/new");
  mu_strvec_release(&env);
}

TEST(agent__health_check)
{
  struct mu_agent_config cfg;
  mu_agent_config_init(&cfg);
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX), why = MU_BUF_INIT(SIZE_MAX);
  cfg.health_check = "echo all good";
  ASSERT_EQ(mu_agent_health_check(&cfg, &out, &why), 0);
  ASSERT_STR_EQ(mu_buf_str(&out), "all good\n");
  ASSERT_EQ(why.len, 0);
  mu_buf_clear(&out);
  cfg.health_check = "echo 'GPU 3: ECC errors' >&2; exit 4";
  ASSERT_EQ(mu_agent_health_check(&cfg, &out, &why), MU_EINVAL);
  ASSERT_STR_EQ(mu_buf_str(&out), "GPU 3: ECC errors\n");
  ASSERT_STR_EQ(mu_buf_str(&why), "it exited with code 4");
  /* killed by a signal (its exit code reads 0): failed, naming the signal */
  mu_buf_clear(&out);
  mu_buf_clear(&why);
  cfg.health_check = "echo dying; kill -9 $$";
  ASSERT_EQ(mu_agent_health_check(&cfg, &out, &why), MU_EINVAL);
  ASSERT_STR_EQ(mu_buf_str(&out), "dying\n");
  ASSERT_NOT_NULL(strstr(mu_buf_str(&why), "killed by signal 9"));
  /* longer than the timeout: killed (with what it started), failed */
  mu_buf_clear(&out);
  mu_buf_clear(&why);
  cfg.health_check = "echo checking; sleep 30 & sleep 30";
  cfg.health_check_timeout_s = 0.3;
  ASSERT_EQ(mu_agent_health_check(&cfg, &out, &why), MU_EINVAL);
  ASSERT_STR_EQ(mu_buf_str(&out), "checking\n");
  ASSERT(strstr(mu_buf_str(&why), "longer than --health-check-timeout (0.3 s)") != NULL);
  /* only the last bytes of a long output are kept */
  mu_buf_clear(&out);
  mu_buf_clear(&why);
  cfg.health_check_timeout_s = 20;
  cfg.health_check = "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done; exit 1";
  ASSERT_EQ(mu_agent_health_check(&cfg, &out, &why), MU_EINVAL);
  ASSERT_EQ(out.len, MU_AGENT_CHECK_OUTPUT_MAX);
  ASSERT(strstr(mu_buf_str(&out), "line 1999\n") != NULL);
  ASSERT(strstr(mu_buf_str(&out), "line 1\n") == NULL);
  mu_buf_release(&out);
  mu_buf_release(&why);
}

/* The heartbeat file's line protocol (docs/agent.md, "Progress"): `step N[/T]`, `checkpoint N`;
 * anything else is plain progress (0), never an error. N: 1 to 18 digits (max and max+1). */
TEST(agent__progress_lines)
{
  static const struct {
    const char *line;
    int kind;
    long long n, total;
  } rows[] = {
      {"step 1200", 1, 1200, -1},
      {"checkpoint 1000", 2, 1000, -1},
      {"  step\t7 \r", 1, 7, -1},
      {"step 999999999999999999", 1, 999999999999999999LL, -1},
      {"step 1000000000000000000", 0, 0, -1},
      {"step", 0, 0, -1},
      {"step ", 0, 0, -1},
      {"step -1", 0, 0, -1},
      {"step 12x", 0, 0, -1},
      {"steps 12", 0, 0, -1},
      {"Step 12", 0, 0, -1},
      {"step 1 2", 0, 0, -1},
      {"checkpoint", 0, 0, -1},
      {"", 0, 0, -1},
      {"epoch 3 step 4", 0, 0, -1},
      {"step 120/1000", 1, 120, 1000},
      {"step 7 / 9", 0, 0, 0},
      {"step 7/", 0, 0, 0},
      {"step 7/x", 0, 0, 0},
      {"step 7/999999999999999999", 1, 7, 999999999999999999LL},
      {"step 7/1000000000000000000", 0, 0, 0},
      {"checkpoint 50/100", 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    long long n = 0, total = -2;
    int kind = mu_agent_parse_progress_line(rows[i].line, strlen(rows[i].line), &n, &total);
    if (kind != rows[i].kind || (kind != 0 && (n != rows[i].n || total != rows[i].total)))
      MU__FAIL("'%s': got %d %lld/%lld, want %d %lld/%lld", rows[i].line, kind, n, total,
               rows[i].kind, rows[i].n, rows[i].total);
  }
}
