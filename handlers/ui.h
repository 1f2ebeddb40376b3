/* ui.h -- GET /ui/ and /ui/{file}: the status page, static files from ui/
 * embedded at build time (build/gen/ui_files.h, like the Lua scripts).
 * The page reads the same API any client does. */
#ifndef LOCKGATE_UI_H
#define LOCKGATE_UI_H

struct gw_request;

void ui_file(struct gw_request *req);

/* GET /ui: 301 to /ui/ (the page's relative links need the slash). */
void ui_redirect(struct gw_request *req);

#endif
