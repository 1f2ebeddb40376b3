/* ui.c -- see ui.h.  The bytes come from `xxd -i`, run inside ui/ (so the
 * names are index_html, index_html_len, ...); they are not NUL-terminated. */
#include "handlers/ui.h"
#include "common/alloc.h"
#include "server/http.h"
#include "server/reply.h"

#include <string.h>

#include "ui_files.h"

struct ui_asset {
    const char *name;         /* "app.js" */
    const char *type;         /* its Content-Type */
    const unsigned char *src; /* its bytes */
    size_t len;               /* their number */
};

#define ASSET(name, type, sym) \
    { name, type, sym, sizeof sym }

static const struct ui_asset assets[] = {
    ASSET("index.html", "text/html; charset=utf-8", index_html),
    ASSET("style.css", "text/css; charset=utf-8", style_css),
    ASSET("app.js", "text/javascript; charset=utf-8", app_js),
};

void ui_redirect(struct gw_request *req) {
    static const char body[] = "/ui/\n";
    reply_header(req, "Location", "/ui/");
    reply_raw(req, 301, "text/plain; charset=utf-8", alloc_copy(body, sizeof body - 1),
              sizeof body - 1);
}

void ui_file(struct gw_request *req) {
    const char *name = "index.html";
    size_t len = strlen(name);
    if (req->match.param_len[0] > 0 && strcmp(req->path, "/ui/") != 0) {
        name = req->match.param[0];
        len = req->match.param_len[0];
    }
    for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++) {
        if (strlen(assets[i].name) != len || memcmp(assets[i].name, name, len) != 0) continue;
        /* The page is fixed for a build; a reload picks up a new gateway. */
        reply_header(req, "Cache-Control", "no-cache");
        reply_header(req, "Content-Security-Policy",
                     "default-src 'self'; img-src 'self' data:; style-src 'self'");
        reply_raw(req, 200, assets[i].type, alloc_copy((const char *)assets[i].src, assets[i].len),
                  assets[i].len);
        return;
    }
    reply_problem(req, CODE_NOT_FOUND, "no file '%.*s' in the status page", (int)len, name);
}
