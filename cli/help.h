/* help.h -- the help texts, one per command, and help_main for lockctl. */
#ifndef LOCKCTL_HELP_H
#define LOCKCTL_HELP_H

extern const char help_exit[];
extern const char help_main[];
extern const char help_run[];
extern const char help_acquire[];
extern const char help_extend[];
extern const char help_release[];
extern const char help_status[];
extern const char help_id[];
extern const char help_ls[];
extern const char help_watch[];
extern const char help_elect[];
extern const char help_observe[];

/* Prints text, then the exit-status table, on stdout. */
void help_print(const char *text);

#endif
