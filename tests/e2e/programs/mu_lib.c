/* mu_lib.c: a library the detector's test dlopens: its global is a root. */
void *mu_lib_global;
