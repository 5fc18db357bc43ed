/* leak.c: the demo's leaking program. It builds a list, then drops the list head without
 * freeing it: every node becomes unreachable. */
#include <stdio.h>
#include <stdlib.h>

struct node {
    struct node *next;
    char name[24];
};

static struct node *build_list(int n)
{
    struct node *head = NULL;
    for (int i = 0; i < n; i++) {
        struct node *nd = calloc(1, sizeof(*nd));
        snprintf(nd->name, sizeof(nd->name), "node %d", i);
        nd->next = head;
        head = nd;
    }
    return head;
}

int main(void)
{
    struct node *list = build_list(5);
    printf("first node: %s\n", list->name);
    list = NULL; /* bug: the five nodes are never freed */
    return 0;
}
