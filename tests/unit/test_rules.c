/* Tests for rules/: the rendezvous rules (rules.h). A table of scenarios, one row per rule at
 * least, and an exhaustive checker that runs every sequence of events on small runs and checks
 * the rendezvous' invariants after every step. */
#include "alloc.h"
#include "rules.h"
#include "task.h"

#include <time.h>

/* ---------------------------------------------------------------------------------------------
 * Scenarios: a run, the events ("J0" node 0 joins; O leaves with success, X leaves failed, E
 * lease expired, C connection lost, F failed, H hung, U unhealthy, B heartbeat, P progress, T
 * the last call's timer; "F0@1" reports round 1), the state expected after the last event and
 * a rule that decided it.
 */
struct scenario {
  const char *name;
  uint32_t min, max, last_call;
  int64_t max_restarts;
  uint8_t nnodes;
  const char *events;
  uint64_t round;
  int active;
  int run; /* enum mu_rules_run_state */
  uint32_t restarts;
  const char *members; /* node indices in rank order */
  const char *rule;
};

static const struct scenario scenarios[] = {
    {"closes when max joined", 2, 2, 0, 3, 2, "J0 J1", 1, 1, MU_RUN_OPEN, 0, "01", "close-full"},
    {"waits below min", 2, 2, 0, 3, 2, "J0", 0, 0, MU_RUN_OPEN, 0, "", "below-min"},
    {"starts the last call at min", 1, 3, 100, 3, 3, "J0", 0, 0, MU_RUN_OPEN, 0, "", "last-call"},
    {"closes at the last call's end", 1, 3, 100, 3, 3, "J0 J1 T", 1, 1, MU_RUN_OPEN, 0, "01",
     "close-last-call"},
    {"closes when every survivor re-joined", 1, 3, 100, 3, 3, "J0 T F0 J0", 2, 1, MU_RUN_OPEN, 1,
     "0", "close-known"},
    {"a re-join ends the round, counts nothing", 2, 2, 0, 3, 2, "J0 J1 J0", 1, 0, MU_RUN_OPEN, 0,
     "01", "rejoin"},
    {"a newcomer with room: members told waiting", 1, 2, 100, 3, 2, "J0 T J1", 1, 1, MU_RUN_OPEN, 0,
     "0", "scale-up"},
    {"the scale-up's round takes the newcomer", 1, 2, 100, 3, 2, "J0 T J1 J0", 2, 1, MU_RUN_OPEN, 0,
     "01", "close-full"},
    {"a failure during a scale-up counts nothing", 1, 2, 100, 3, 2, "J0 T J1 F0", 1, 1, MU_RUN_OPEN,
     0, "0", "failure-scale-up"},
    {"a failure counts one and ends the round", 2, 2, 0, 3, 2, "J0 J1 F1", 1, 0, MU_RUN_OPEN, 1,
     "01", "failure"},
    {"a hang counts as a failure", 2, 2, 0, 3, 2, "J0 J1 H0", 1, 0, MU_RUN_OPEN, 1, "01",
     "failure"},
    {"the second report of a round counts nothing", 2, 2, 0, 3, 2, "J0 J1 F1 F0", 1, 0, MU_RUN_OPEN,
     1, "01", "failure-late"},
    {"a report of an older round counts nothing", 2, 2, 0, 3, 2, "J0 J1 F1 J0 J1 F0@1", 2, 1,
     MU_RUN_OPEN, 1, "01", "failure-late"},
    {"no restart left: the run is shut once the next round could close", 2, 2, 0, 0, 2,
     "J0 J1 F0 J1 J0", 1, 0, MU_RUN_SHUT, 0, "01", "budget-spent"},
    {"a lost lease ends the round, counts nothing", 2, 2, 0, 3, 2, "J0 J1 E1", 1, 0, MU_RUN_OPEN, 0,
     "0", "lost"},
    {"a closed connection is a loss", 2, 2, 0, 3, 2, "J0 J1 C0", 1, 0, MU_RUN_OPEN, 0, "1", "lost"},
    {"an unhealthy member is removed, counts nothing", 2, 2, 0, 3, 2, "J0 J1 U1", 1, 0, MU_RUN_OPEN,
     0, "0", "unhealthy"},
    {"a member that left failed ends the round", 2, 2, 0, 3, 2, "J0 J1 X1", 1, 0, MU_RUN_OPEN, 0,
     "0", "left"},
    {"every member succeeded: the run closes", 2, 2, 0, 3, 2, "J0 J1 O0 O1", 1, 1, MU_RUN_CLOSED, 0,
     "", "succeeded"},
    {"heartbeats and progress change nothing", 2, 2, 0, 3, 2, "J0 J1 B0 P1", 1, 1, MU_RUN_OPEN, 0,
     "01", NULL},
    {"a join beyond a full round is a standby", 2, 2, 0, 3, 3, "J0 J1 J2", 1, 1, MU_RUN_OPEN, 0,
     "01", "standby"},
    {"a standby takes a failed member's place", 2, 2, 0, 3, 3, "J0 J1 J2 F0 J1", 2, 1, MU_RUN_OPEN,
     1, "12", "close-full"},
    {"a failed member goes after the standbys", 2, 2, 0, 3, 3, "J0 J1 J2 F0 J0 J1", 2, 1,
     MU_RUN_OPEN, 1, "12", "close-full"},
    {"a standby takes a lost member's place", 2, 2, 0, 3, 3, "J0 J1 J2 E0 J1", 2, 1, MU_RUN_OPEN, 0,
     "12", "close-full"},
    {"a re-join keeps the standby out", 2, 2, 0, 3, 3, "J0 J1 J2 J0 J1", 2, 1, MU_RUN_OPEN, 0, "01",
     "close-full"},
    /* issue 30 item 3: a finished run is never lost */
    {"a member lost after another succeeded: the round goes on", 3, 3, 0, 3, 3, "J0 J1 J2 O0 E2", 1,
     1, MU_RUN_OPEN, 0, "1", "lost-after-success"},
    {"the others succeeded, one was lost after: the run closes", 3, 3, 0, 3, 3, "J0 J1 J2 O0 E2 O1",
     1, 1, MU_RUN_CLOSED, 0, "", "succeeded-lost"},
    {"a loss before the successes: the run still closes", 3, 3, 0, 3, 3, "J0 J1 J2 C2 O0 O1", 1, 0,
     MU_RUN_CLOSED, 0, "", "succeeded-lost"},
    {"a lost member's late success counts", 2, 2, 0, 3, 2, "J0 J1 E1 O1 O0", 1, 0, MU_RUN_CLOSED, 0,
     "", "succeeded"},
    {"a member finished, too few nodes left: shut at once", 3, 3, 0, 3, 3, "J0 J1 J2 O0 F1", 1, 0,
     MU_RUN_SHUT, 1, "12", "unreachable"},
    {"a member finished, enough nodes left: no shut", 2, 3, 100, 3, 3, "J0 J1 J2 O0 F1", 1, 0,
     MU_RUN_OPEN, 1, "12", "failure"},
    {"a success then a re-join spoils the round: shut at once", 3, 3, 0, 3, 3, "J0 J1 J2 C2 O0 J1",
     1, 0, MU_RUN_SHUT, 0, "1", "unreachable"},
    /* issue 30 item 4: a partition is a lost node, not a failure */
    {"a hang the loss of a peer caused counts nothing", 3, 3, 0, 3, 4, "J0 J1 J2 J3 H0 E2", 1, 0,
     MU_RUN_OPEN, 0, "01", "failure-partition"},
    {"the standby then takes the lost node's place", 3, 3, 0, 3, 4, "J0 J1 J2 J3 H0 E2 J1 J0", 2, 1,
     MU_RUN_OPEN, 0, "013", "close-full"},
    {"no restart left: the next round waits for the failed round's survivors", 2, 2, 0, 0, 3,
     "J0 J1 J2 F0 J0", 1, 0, MU_RUN_OPEN, 0, "01", "shut-waits"},
    {"no restart left, then a healthy member lost: no shut", 2, 2, 0, 0, 3, "J0 J1 J2 F0 E1 J0", 2,
     1, MU_RUN_OPEN, 0, "02", "close-full"},
    {"the reporter's own loss gives nothing back", 2, 2, 0, 3, 2, "J0 J1 F0 E0", 1, 0, MU_RUN_OPEN,
     1, "1", "lost"},
};

static int parse_event(const char **p, struct mu_rules_event *ev, uint64_t now)
{
  while (**p == ' ')
    (*p)++;
  if (**p == '\0')
    return 0;
  static const char kinds[] = "JOXBECFHUTP";
  static const enum mu_rules_event_kind map[] = {
      MU_EV_JOIN,          MU_EV_LEAVE_OK,  MU_EV_LEAVE_FAIL, MU_EV_HEARTBEAT,
      MU_EV_LEASE_EXPIRED, MU_EV_CONN_LOST, MU_EV_FAILED,     MU_EV_HUNG,
      MU_EV_UNHEALTHY,     MU_EV_TIMER,     MU_EV_PROGRESS};
  const char *k = strchr(kinds, **p);
  ASSERT(k != NULL);
  memset(ev, 0, sizeof(*ev));
  ev->kind = map[k - kinds];
  ev->now = now;
  (*p)++;
  if (**p >= '0' && **p <= '9')
    ev->node = (uint8_t)(*(*p)++ - '0');
  if (**p == '@') {
    (*p)++;
    ev->round = (uint64_t)(*(*p)++ - '0');
  }
  return 1;
}

static void members_of(const struct mu_rules_state *s, char *out)
{
  size_t k = 0;
  for (uint32_t r = 0; r < s->round_nodes; r++)
    for (uint8_t i = 0; i < s->nnodes; i++)
      if (s->node[i].member && s->node[i].rank == r)
        out[k++] = (char)('0' + i);
  out[k] = '\0';
}

static int decided_by(const struct mu_rules_effects *fx, const char *rule)
{
  if (strcmp(mu_rule_name(fx->rule), rule) == 0)
    return 1;
  for (uint32_t i = 0; i < fx->n; i++)
    if (strcmp(mu_rule_name(fx->fx[i].rule), rule) == 0)
      return 1;
  return 0;
}

TEST(rules__scenarios)
{
  for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
    const struct scenario *sc = &scenarios[i];
    struct mu_rules_state s;
    struct mu_rules_effects fx;
    struct mu_rules_event ev;
    mu_rules_init(&s, sc->min, sc->max, sc->last_call, sc->max_restarts, sc->nnodes);
    const char *p = sc->events;
    uint64_t now = 1000;
    while (parse_event(&p, &ev, now)) {
      if (ev.kind == MU_EV_TIMER)
        ev.now = now = s.last_call_at;
      if (mu_rules_step(&s, &ev, &fx) != 0)
        MU__FAIL("scenario '%s': event %d of '%s' did not apply", sc->name, (int)ev.kind,
                 sc->events);
      now += 10;
    }
    char got[MU_RULES_NODES_MAX + 1];
    members_of(&s, got);
    if (s.round != sc->round || s.active != sc->active || s.run != sc->run ||
        s.restarts != sc->restarts || strcmp(got, sc->members) != 0 ||
        (sc->rule != NULL && !decided_by(&fx, sc->rule)))
      MU__FAIL("scenario '%s' (%s): got round %llu active %d run %d restarts %u members '%s' "
               "rule %s; want %llu %d %d %u '%s' %s",
               sc->name, sc->events, (unsigned long long)s.round, s.active, s.run, s.restarts, got,
               mu_rule_name(fx.rule), (unsigned long long)sc->round, sc->active, sc->run,
               sc->restarts, sc->members, sc->rule ? sc->rule : "-");
  }
}

TEST(rules__names_are_unique_and_complete)
{
  for (int i = 0; i < MU_RULE_COUNT; i++) {
    ASSERT(strcmp(mu_rule_name((enum mu_rule)i), "none") != 0);
    for (int j = 0; j < i; j++)
      ASSERT(strcmp(mu_rule_name((enum mu_rule)i), mu_rule_name((enum mu_rule)j)) != 0);
  }
  ASSERT_STR_EQ(mu_rule_name(MU_RULE_COUNT), "none");
}

TEST(rules__bad_events_change_nothing)
{
  struct mu_rules_state s, before;
  struct mu_rules_effects fx;
  mu_rules_init(&s, 2, 2, 0, 1, 2);
  before = s;
  struct mu_rules_event ev = {.kind = MU_EV_FAILED, .node = 0, .now = 1};
  ASSERT_EQ(mu_rules_step(&s, &ev, &fx), -1); /* not in the run */
  ev.kind = MU_EV_JOIN;
  ev.node = 2; /* the model has nodes 0 and 1 */
  ASSERT_EQ(mu_rules_step(&s, &ev, &fx), -1);
  ev.kind = MU_EV_TIMER; /* no last call armed */
  ASSERT_EQ(mu_rules_step(&s, &ev, &fx), -1);
  ASSERT(memcmp(&s, &before, sizeof(s)) == 0);
}

/* ---------------------------------------------------------------------------------------------
 * The exhaustive checker. A frame is the model's state plus what the checker remembers of the
 * current round on its own (not from the rules): its members when it closed, those that left
 * with success, and whether one of them is gone (lost, left, unhealthy) or failed.
 */
struct frame {
  struct mu_rules_state s;
  uint8_t closed_mask;  /* members at the round's close */
  uint8_t ok_mask;      /* of which left with success (before or after being lost) */
  uint8_t lost_mask;    /* of which lost (lease, connection) */
  uint8_t lost;         /* a member was lost or failed since */
  uint8_t was_full;     /* the round closed with max_nodes */
  uint8_t spoiled;      /* a member failed (counted), left failed, was unhealthy or re-joined */
  uint8_t counted;      /* a failure of the round counted a restart, or found none left */
  uint8_t suspects;     /* healthy members of the round before, left out of this one, not
                         * re-joined since */
  uint8_t prev_counted; /* the round before counted a restart, not given back */
};

struct checker {
  uint64_t *seen; /* hash set of (frame, depth left) */
  size_t cap, steps, states;
  int depth;
  const char *trail[32];
  char trail_buf[32][12];
};

static uint64_t frame_hash(const struct frame *f, int left)
{
  const unsigned char *p = (const unsigned char *)f;
  uint64_t h = 1469598103934665603ULL ^ (uint64_t)left;
  for (size_t i = 0; i < sizeof(*f); i++)
    h = (h ^ p[i]) * 1099511628211ULL;
  return h ? h : 1;
}

/* 1 when (f, left) or the same frame with more depth left was explored already. */
static int seen_before(struct checker *c, const struct frame *f, int left)
{
  uint64_t h = frame_hash(f, left);
  size_t i = (size_t)(h & (c->cap - 1));
  while (c->seen[i] != 0) {
    if (c->seen[i] == h)
      return 1;
    i = (i + 1) & (c->cap - 1);
  }
  if (c->states * 2 < c->cap) {
    c->seen[i] = h;
    c->states++;
  }
  return 0;
}

static void fail_trail(const struct checker *c, int at, const char *what)
{
  fprintf(stderr, "# invariant broken: %s\n# events:", what);
  for (int i = 0; i <= at; i++)
    fprintf(stderr, " %s", c->trail[i]);
  fprintf(stderr, "\n");
  abort();
}

static uint8_t member_mask(const struct mu_rules_state *s)
{
  uint8_t m = 0;
  for (uint8_t i = 0; i < s->nnodes; i++)
    m |= (uint8_t)(s->node[i].member << i);
  return m;
}

/* A newcomer waits and the active round has room, from the nodes themselves. */
static int scale_up_pending(const struct mu_rules_state *s)
{
  for (uint8_t i = 0; i < s->nnodes; i++)
    if (s->node[i].joining && !s->node[i].member)
      return s->round_nodes < s->max_nodes;
  return 0;
}

/* Does the restart count move as docs/agent.md says ("Restarts are the run's")? Only the first
 * failed/hung report of an active round by one of its members counts, unless the round is
 * ending for a scale-up; with no restart left the run is shut instead, once the next round
 * could close. A healthy member of that round lost before the next round closes gives the
 * restart back (or calls the shut off): the loss caused the failure (issue 30 item 4). */
static void check_restarts(struct checker *c, int at, const struct frame *a,
                           const struct mu_rules_event *ev, struct frame *b)
{
  const struct mu_rules_state *s = &a->s;
  const struct mu_rules_node *n = &s->node[ev->node < s->nnodes ? ev->node : 0];
  int report = ev->kind == MU_EV_FAILED || ev->kind == MU_EV_HUNG;
  int counts = report && s->run == MU_RUN_OPEN && s->active && n->member &&
               (ev->round == 0 || ev->round == s->round) && !scale_up_pending(s);
  int left = s->max_restarts < 0 || (int64_t)s->restarts < s->max_restarts;
  int loss = ev->kind == MU_EV_LEASE_EXPIRED || ev->kind == MU_EV_CONN_LOST;
  int refund = loss && s->run == MU_RUN_OPEN && n->member && !n->failed && a->counted != 0;
  int bit = 1 << (ev->node & 7);
  int refund_prev =
      loss && s->run == MU_RUN_OPEN && !n->member && (a->suspects & bit) && a->prev_counted;
  uint32_t want = s->restarts + (counts && left) - (refund && a->counted == 1) - refund_prev;
  if (b->s.restarts != want)
    fail_trail(c, at, "the restart count moved for what does not count, or not for a failure");
  if (counts)
    b->counted = left ? 1 : 2;
  if (refund)
    b->counted = 0;
  if (refund_prev)
    b->prev_counted = 0;
  if (ev->kind == MU_EV_JOIN || loss)
    b->suspects &= (uint8_t)~bit;
  if (counts && !left && !(b->s.run == MU_RUN_SHUT || b->s.shut_pending))
    fail_trail(c, at, "a failure with no restart left did not shut the run (or wait to)");
  if (counts || (ev->kind == MU_EV_JOIN && n->member) ||
      ((ev->kind == MU_EV_LEAVE_FAIL || ev->kind == MU_EV_UNHEALTHY) && n->member) ||
      (ev->kind == MU_EV_LEAVE_OK && n->member && (n->joining || n->failed)))
    b->spoiled = 1;
}

/* Can the run no longer reach its minimum (issue 30 item 3)? Members of its round finished with
 * success, the round ended, no member still runs toward a success (or the round is spoiled),
 * and fewer nodes than min_nodes are left. */
static int unreachable(const struct frame *f)
{
  const struct mu_rules_state *s = &f->s;
  if (s->round == 0 || s->active || f->ok_mask == 0)
    return 0;
  uint32_t present = 0, running = 0;
  for (uint8_t i = 0; i < s->nnodes; i++) {
    const struct mu_rules_node *n = &s->node[i];
    present += n->present;
    running += n->present && n->member && !n->joining && !n->failed;
  }
  return (f->spoiled || running == 0) && present < s->min_nodes;
}

static void check_round(struct checker *c, int at, const struct frame *a, struct frame *b,
                        const struct mu_rules_event *ev)
{
  const struct mu_rules_state *s = &b->s;
  uint8_t ranks = 0, members = 0;
  for (uint8_t i = 0; i < s->nnodes; i++) {
    if (!s->node[i].member)
      continue;
    members++;
    if (s->node[i].rank >= s->round_nodes || (ranks >> s->node[i].rank) & 1)
      fail_trail(c, at, "a rank is held by two nodes, or beyond the round");
    ranks |= (uint8_t)(1u << s->node[i].rank);
  }
  if (members + s->round_gone != s->round_nodes)
    fail_trail(c, at, "the round's members and its lost ones do not add up");
  if (s->round == a->s.round)
    return;
  if (s->round_nodes < s->min_nodes || s->round_nodes > s->max_nodes || s->round_nodes == 0)
    fail_trail(c, at, "a round closed below its minimum or above its maximum");
  uint8_t now = member_mask(s);
  /* A standby (a node not in the last round) takes a place in a round after a full one only
   * when a member of that round was lost or failed, or the last call ended without it. */
  if (a->s.round > 0 && a->was_full && (now & ~a->closed_mask) != 0 && !b->lost &&
      ev->kind != MU_EV_TIMER)
    fail_trail(c, at, "a standby took a place though no member was lost");
  /* the healthy members of the round that ended, left out of this one */
  b->suspects = 0;
  for (uint8_t i = 0; i < a->s.nnodes; i++) {
    const struct mu_rules_node *o = &a->s.node[i];
    if (o->member && !o->failed && !o->joining)
      b->suspects |= (uint8_t)(1u << i);
  }
  b->prev_counted = b->counted == 1;
  b->closed_mask = now;
  b->ok_mask = 0;
  b->lost_mask = 0;
  b->spoiled = 0;
  b->counted = 0;
  b->lost = 0;
  b->was_full = s->round_nodes == s->max_nodes;
}

/* The checker's own record of the round, then every invariant. */
static void check_step(struct checker *c, int at, const struct frame *a,
                       const struct mu_rules_event *ev, struct frame *b)
{
  const struct mu_rules_node *n = &a->s.node[ev->node < a->s.nnodes ? ev->node : 0];
  int member = a->s.run == MU_RUN_OPEN && n->member;
  int removes = ev->kind == MU_EV_LEAVE_OK || ev->kind == MU_EV_LEAVE_FAIL ||
                ev->kind == MU_EV_LEASE_EXPIRED || ev->kind == MU_EV_CONN_LOST ||
                ev->kind == MU_EV_UNHEALTHY;
  uint8_t bit = (uint8_t)(1u << (ev->node & 7));
  int open = a->s.run == MU_RUN_OPEN;
  if (ev->kind == MU_EV_LEAVE_OK && member && !n->joining && !n->failed)
    b->ok_mask |= bit;
  if (ev->kind == MU_EV_LEAVE_OK && open && !n->present && (a->lost_mask & bit))
    b->ok_mask |= bit; /* a success that came after the member's loss */
  if ((ev->kind == MU_EV_LEASE_EXPIRED || ev->kind == MU_EV_CONN_LOST) && member)
    b->lost_mask |= bit;
  if (member && removes)
    b->lost = 1; /* gone from the round: its place is free (a success frees it too) */
  if (member && b->s.node[ev->node].failed && !n->failed)
    b->lost = 1;
  check_restarts(c, at, a, ev, b);
  check_round(c, at, a, b, ev);
  /* the run ends succeeded when every member of the round succeeded, or was lost after or
   * before the others' success, and nothing spoiled the round */
  int all_ok = a->closed_mask != 0 && b->ok_mask != 0 && !b->spoiled &&
               ((b->ok_mask | b->lost_mask) & a->closed_mask) == a->closed_mask &&
               b->s.round == a->s.round;
  if (open && all_ok && b->s.run != MU_RUN_CLOSED)
    fail_trail(c, at, "every member succeeded but the run did not end succeeded");
  if (open && b->s.run == MU_RUN_CLOSED && !all_ok)
    fail_trail(c, at, "the run ended succeeded though a member did not succeed");
  if (b->s.run == MU_RUN_OPEN && unreachable(b))
    fail_trail(c, at, "a run that can no longer reach its minimum did not end at once");
  if (open && b->s.run == MU_RUN_SHUT && !unreachable(b) && a->counted != 2 && b->counted != 2)
    fail_trail(c, at, "the run was shut with a restart left and its minimum in reach");
}

static const char ev_letter[MU_EV_COUNT] = {
    [MU_EV_JOIN] = 'J',      [MU_EV_LEAVE_OK] = 'O',      [MU_EV_LEAVE_FAIL] = 'X',
    [MU_EV_HEARTBEAT] = 'B', [MU_EV_LEASE_EXPIRED] = 'E', [MU_EV_CONN_LOST] = 'C',
    [MU_EV_FAILED] = 'F',    [MU_EV_HUNG] = 'H',          [MU_EV_UNHEALTHY] = 'U',
    [MU_EV_TIMER] = 'T',     [MU_EV_PROGRESS] = 'P'};

/* The events the checker tries: those that change something (heartbeat and progress do not,
 * hang and connection loss are failure and lease expiry to the rules: the scenarios show it). */
static const enum mu_rules_event_kind tried[] = {MU_EV_JOIN,       MU_EV_LEAVE_OK,
                                                 MU_EV_LEAVE_FAIL, MU_EV_LEASE_EXPIRED,
                                                 MU_EV_FAILED,     MU_EV_UNHEALTHY};

static void explore(struct checker *c, const struct frame *f, int at)
{
  if (at == c->depth || f->s.run != MU_RUN_OPEN || seen_before(c, f, c->depth - at))
    return;
  size_t nkinds = sizeof(tried) / sizeof(tried[0]);
  for (size_t k = 0; k <= nkinds * f->s.nnodes + 1; k++) {
    struct mu_rules_event ev = {.now = (uint64_t)at * 1000 + 1};
    if (k == nkinds * f->s.nnodes) {
      ev.kind = MU_EV_TIMER;
    } else if (k == nkinds * f->s.nnodes + 1) { /* a report of the round before */
      if (f->s.round < 2)
        continue;
      ev.kind = MU_EV_FAILED;
      ev.round = f->s.round - 1;
    } else {
      ev.kind = tried[k % nkinds];
      ev.node = (uint8_t)(k / nkinds);
    }
    struct frame g = *f;
    struct mu_rules_effects fx;
    if (mu_rules_step(&g.s, &ev, &fx) != 0) {
      if (memcmp(&g.s, &f->s, sizeof(g.s)) != 0)
        fail_trail(c, at - 1, "an event that did not apply changed the state");
      continue;
    }
    c->steps++;
    snprintf(c->trail_buf[at], sizeof(c->trail_buf[at]), "%c%u%s", ev_letter[ev.kind],
             (unsigned)ev.node, ev.round ? "@old" : "");
    c->trail[at] = c->trail_buf[at];
    check_step(c, at, f, &ev, &g);
    explore(c, &g, at + 1);
  }
}

struct small_run {
  uint32_t min, max, last_call;
  int64_t max_restarts;
  uint8_t nnodes;
  int depth;
};

TEST(rules__exhaustive_invariants)
{
  /* Up to 4 nodes and 1 standby, each to the depth that keeps the whole to a few seconds of
   * CPU under ASan (the runner allows a case 30 s). */
  static const struct small_run runs[] = {
      {1, 1, 0, 1, 2, 12},  {2, 2, 0, 1, 3, 9},   {1, 2, 100, 2, 3, 9},
      {2, 3, 100, 1, 4, 7}, {3, 4, 100, 1, 5, 6}, {4, 4, 0, 2, 5, 6},
  };
  struct checker c;
  memset(&c, 0, sizeof(c));
  c.cap = (size_t)1 << 22;
  c.seen = mu_calloc(c.cap, sizeof(*c.seen));
  clock_t t0 = clock();
  for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
    struct frame f;
    memset(&f, 0, sizeof(f));
    mu_rules_init(&f.s, runs[i].min, runs[i].max, runs[i].last_call, runs[i].max_restarts,
                  runs[i].nnodes);
    memset(c.seen, 0, c.cap * sizeof(*c.seen));
    c.states = 0;
    c.depth = runs[i].depth;
    size_t before = c.steps;
    explore(&c, &f, 0);
    fprintf(stderr, "# run %u:%u of %u nodes, max_restarts %lld, depth %d: %zu steps, %zu states\n",
            runs[i].min, runs[i].max, runs[i].nnodes, (long long)runs[i].max_restarts,
            runs[i].depth, c.steps - before, c.states);
    ASSERT(c.steps - before > 1000); /* it explored */
  }
  fprintf(stderr, "# %zu steps in %.1f s of CPU\n", c.steps,
          (double)(clock() - t0) / CLOCKS_PER_SEC);
  mu_free(c.seen);
}

/* ---------------------------------------------------------------------------------------------
 * The job's progress rules (progress.h): one row a rule, at the bounds (the timeout's ms and the
 * ms before it).
 */
#include "progress.h"

struct progress_row {
  const char *name;
  int64_t start, last, timeout, initial, now;
  const char *rule;
  int64_t idle;
};

static const struct progress_row progress_rows[] = {
    {"no hang timeout: never hung", 0, 0, 0, 0, 1000000, "progress-off", 1000000},
    {"one rank moved within the timeout", 1000, 9000, 5000, 600000, 13999, "progress-moving", 4999},
    {"no rank moved for the timeout: the job is hung", 1000, 9000, 5000, 600000, 14000, "hung-job",
     5000},
    {"an 8 s import is within the initial timeout", 1000, 0, 5000, 600000, 9000,
     "progress-starting", 8000},
    {"the initial timeout's ms before", 1000, 0, 5000, 600000, 600999, "progress-starting", 599999},
    {"no progress since the start for the initial timeout", 1000, 0, 5000, 600000, 601000,
     "hung-before-first-progress", 600000},
    {"a clock behind the last progress is not idle", 1000, 9000, 5000, 600000, 8000,
     "progress-moving", 0},
};

TEST(rules__progress_rows)
{
  for (size_t i = 0; i < sizeof(progress_rows) / sizeof(progress_rows[0]); i++) {
    const struct progress_row *r = &progress_rows[i];
    struct mu_progress_view v = {r->start, r->last, r->timeout, r->initial};
    int64_t idle = -1;
    const char *got = mu_progress_rule_name(mu_rule_progress(&v, r->now, &idle));
    if (strcmp(got, r->rule) != 0 || idle != r->idle)
      MU__FAIL("%s: got %s idle %lld, want %s idle %lld", r->name, got, (long long)idle, r->rule,
               (long long)r->idle);
  }
}

struct suspect_row {
  const char *name;
  int n;
  int64_t last[4];
  enum mu_stack_kind stack[4];
  const char *want; /* per rank: o own code, d oldest, - none */
  int count;
};

static const struct suspect_row suspect_rows[] = {
    {"the rank in its own code, not the silent ones",
     4,
     {9000, 0, 0, 0},
     {MU_STACK_COLLECTIVE, MU_STACK_OWN_CODE, MU_STACK_COLLECTIVE, MU_STACK_COLLECTIVE},
     "-o--",
     1},
    {"no stack says more: the oldest that progressed",
     3,
     {9000, 7000, 0},
     {MU_STACK_UNKNOWN, MU_STACK_COLLECTIVE, MU_STACK_UNKNOWN},
     "-d-",
     1},
    {"none progressed: every rank", 2, {0, 0}, {MU_STACK_UNKNOWN, MU_STACK_COLLECTIVE}, "dd", 2},
};

TEST(rules__suspect_rows)
{
  for (size_t i = 0; i < sizeof(suspect_rows) / sizeof(suspect_rows[0]); i++) {
    const struct suspect_row *r = &suspect_rows[i];
    enum mu_progress_rule v[4];
    char got[5] = {0};
    int count = mu_rule_suspects(r->n, r->last, r->stack, v);
    for (int k = 0; k < r->n; k++)
      got[k] = v[k] == MU_SUSPECT_OWN_CODE ? 'o' : v[k] == MU_SUSPECT_OLDEST ? 'd' : '-';
    if (strcmp(got, r->want) != 0 || count != r->count)
      MU__FAIL("%s: got %s (%d), want %s (%d)", r->name, got, count, r->want, r->count);
  }
}

struct auto_row {
  const char *name;
  int64_t slowest;
  uint32_t intervals;
  int64_t kept;
  const char *rule;
  int64_t timeout;
};

static const struct auto_row auto_rows[] = {
    {"too few intervals: learning", 200, MU_AUTO_MIN_INTERVALS - 1, 0, "auto-learning", 0},
    {"0.2 s steps: the floor", 200, MU_AUTO_MIN_INTERVALS, 0, "auto-learned", MU_AUTO_FLOOR_MS},
    {"2 s steps: ten times the slowest", 2000, 40, 0, "auto-learned", 20000},
    {"a kept value from an earlier attempt counts at once", 0, 0, 30000, "auto-learned", 30000},
    {"it never shrinks below the kept value", 2000, 40, 30000, "auto-learned", 30000},
};

TEST(rules__auto_timeout_rows)
{
  for (size_t i = 0; i < sizeof(auto_rows) / sizeof(auto_rows[0]); i++) {
    const struct auto_row *r = &auto_rows[i];
    int64_t t = -1;
    const char *got =
        mu_progress_rule_name(mu_rule_auto_timeout(r->slowest, r->intervals, r->kept, &t));
    if (strcmp(got, r->rule) != 0 || t != r->timeout)
      MU__FAIL("%s: got %s %lld, want %s %lld", r->name, got, (long long)t, r->rule,
               (long long)r->timeout);
  }
}

TEST(rules__retry_rows)
{
  ASSERT_STR_EQ(mu_progress_rule_name(mu_rule_retry(2, 3)), "retry");
  ASSERT_STR_EQ(mu_progress_rule_name(mu_rule_retry(3, 3)), "stop-retrying");
  ASSERT_STR_EQ(mu_progress_rule_name(mu_rule_retry(100, 0)), "retry");
  for (int r = 0; r < MU_PROGRESS_RULE_COUNT; r++) /* every rule has its own name */
    for (int k = r + 1; k < MU_PROGRESS_RULE_COUNT; k++)
      ASSERT(strcmp(mu_progress_rule_name((enum mu_progress_rule)r),
                    mu_progress_rule_name((enum mu_progress_rule)k)) != 0);
}
