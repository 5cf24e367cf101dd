/* musterd's status page: GET / and /ui serve one HTML page (server/ui.html, built into the
 * binary by scripts/embed.cmake: no file is read at run time, nothing external is loaded). The
 * page follows the server through the /v1 API (GET /v1/events, a long poll, then the runs its
 * events name and /metrics). The routes are not public: with tokens or basic auth on, the page
 * needs them too.
 */
#include <stddef.h>

#include "server.h"

extern const unsigned char rv_ui_page[];
extern const size_t rv_ui_page_len;

static void ui_handler(struct rv_req *req)
{
  static const char headers[] =
      "Cache-Control: no-cache\r\n"
      "X-Content-Type-Options: nosniff\r\n"
      "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src "
      "'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
      "frame-ancestors 'none'\r\n";
  rv_reply(req, 200, "text/html; charset=utf-8", headers, rv_ui_page, rv_ui_page_len);
}

static const struct rv_route ui_routes[] = {
    {RV_GET | RV_HEAD, "/", 0, ui_handler, "ui", NULL},
    {RV_GET | RV_HEAD, "/ui", RV_ROUTE_SLASH, ui_handler, "ui", NULL},
    {0, NULL, 0, NULL, NULL, NULL},
};

void rv_ui_register(struct rv_server *srv)
{
  rv_server_add_routes(srv, ui_routes);
}
