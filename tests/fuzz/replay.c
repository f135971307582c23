/*
 * replay.c - runs a fuzz target's LLVMFuzzerTestOneInput once on every file in
 * the directories (or files) named on the command line, so that `make test`
 * replays the corpus with gcc's ASan+UBSan build, without clang or libFuzzer.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data;
    long size;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    data = malloc((size_t)size + 1);   /* + 1: malloc(0) may give NULL */
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)size);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    int i, count = 0;
    for (i = 1; i < argc; i++) {
        struct stat st;
        DIR *dir;
        struct dirent *entry;
        char path[4096];
        if (stat(argv[i], &st) == 0 && !S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i])) return 1;
            count++;
            continue;
        }
        if (!(dir = opendir(argv[i]))) {
            fprintf(stderr, "replay: cannot open %s\n", argv[i]);
            return 1;
        }
        while ((entry = readdir(dir))) {
            if (entry->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s", argv[i], entry->d_name);
            if (replay_file(path)) return 1;
            count++;
        }
        closedir(dir);
    }
    printf("%s: %d inputs replayed\n", argv[0], count);
    return 0;
}
