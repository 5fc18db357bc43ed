/* flamegraph_assets.h: the flame graph page's style sheet and script (flamegraph.css and
 * flamegraph.js in this directory), compiled in at build time by cmake/embed_text.cmake.
 * Each is NUL-terminated text. */
#ifndef HEAPSCOPE_REPORT_FLAMEGRAPH_ASSETS_H
#define HEAPSCOPE_REPORT_FLAMEGRAPH_ASSETS_H

extern const char hs_fg_page_css[];
extern const char hs_fg_page_js[];

#endif
