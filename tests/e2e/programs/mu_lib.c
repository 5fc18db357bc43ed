/* mu_lib.c: a library the detector's test dlopens: its global is a root. */
__attribute__((visibility("default"))) void *mu_lib_global;
