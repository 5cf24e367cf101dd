/* etcd v2 events (see event.h). */
#include "alloc.h"
#include "event.h"

const char *v2_event_action_name(enum v2_event_action a)
{
  static const char *names[] = {
      "get", "create", "set", "update", "delete", "compareAndSwap", "compareAndDelete", "expire"};
  if ((unsigned)a < sizeof(names) / sizeof(names[0]))
    return names[a];
  return "unknown";
}

void v2_event_free(struct v2_event *e)
{
  if (e == NULL)
    return;
  mu_free(e->key);
  mu_free(e->prev_key);
  mu_free(e->json);
  mu_free(e);
}
