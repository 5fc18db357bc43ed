// symbolize_workload.cc: a program whose heap is made by libc, libstdc++ and libpython, for
// bench/symbolize.sh: it leaves its blocks live at exit, so that leak_track lists them with
// stacks through the three libraries. Prints the time its own work took ("work_ms=N"), which
// the bench compares with and without the heapscope command reading its reports.
#include <Python.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

static std::vector<std::string> *g_strings;
static std::vector<char *> *g_dups;

static double now_ms()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static void cxx_work(int n)
{
    for (int i = 0; i < n; i++)
        g_strings->push_back(std::string(40 + i % 64, 'x')); // operator new in libstdc++
}

__attribute__((noinline)) static void libc_work(int n)
{
    char buf[64];
    for (int i = 0; i < n; i++) {
        snprintf(buf, sizeof(buf), "entry %d", i);
        g_dups->push_back(strdup(buf)); // malloc in libc
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    double start = now_ms();
    g_strings = new std::vector<std::string>;
    g_dups = new std::vector<char *>;
    cxx_work(n);
    libc_work(n);
    Py_Initialize(); // never finalized: its objects are live at exit, with libpython stacks
    char code[256];
    snprintf(code, sizeof(code),
             "import json\nkeep = [json.dumps({'k': i, 'v': str(i) * 3}) for i in range(%d)]\n",
             n);
    PyRun_SimpleString(code);
    printf("work_ms=%.1f\n", now_ms() - start);
    return 0;
}
