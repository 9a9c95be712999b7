// SPDX-License-Identifier: BSD-3-Clause
// This process's verbs objects as the kernel counts them (`rdma resource
// show`), and its completion channels (open event files).
#ifndef ZV_TEST_DEVICE_KERNEL_OBJECTS_H
#define ZV_TEST_DEVICE_KERNEL_OBJECTS_H

#include <dirent.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zv::test {

/// Whether a line of `rdma resource show` names a thread of this process:
/// the kernel records the thread that created the object (a passive QP is
/// created by the async thread when it answers for a worker that is away).
inline bool ours(const std::string &line)
{
    size_t at = line.find(" pid ");
    if (at == std::string::npos) {
        return false;
    }
    const std::string tid = std::to_string(std::atoi(line.c_str() + at + 5));
    return access(("/proc/self/task/" + tid).c_str(), F_OK) == 0;
}

/// One dump of kernel_objects(): it may miss some (see there).
inline int kernel_objects_once(const char *resource, const std::string &what)
{
    const std::string cmd = std::string("rdma resource show ") + resource + " 2>/dev/null";
    FILE *f               = popen(cmd.c_str(), "r");
    if (f == nullptr) {
        return -1;
    }
    int n = 0, lines = 0;
    char line[512];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        std::string l(line);
        if (!l.empty() && (l.back() == '\n')) {
            l.back() = ' ';
        }
        ++lines;
        n += (l.find(what) != std::string::npos) && ours(l);
    }
    return ((pclose(f) == 0) && (lines > 0)) ? n : -1;
}

/// This process's objects of 'resource' (qp, cq, srq) whose line names
/// 'what' (e.g. "type RC "; empty: all); -1 when the tool cannot be run, or
/// lists nothing at all (not even another process's). The kernel dumps a
/// device's objects in chunks, each resuming at the count already sent: when
/// another process destroys objects meanwhile (the other gtest shard opening
/// and closing interfaces), the rest shift and some of ours are skipped (456
/// of 512 counted once), never counted twice. Hence the most of three dumps.
inline int kernel_objects(const char *resource, const std::string &what = {})
{
    int n = -1;
    for (int i = 0; i < 3; ++i) {
        const int once = kernel_objects_once(resource, what);
        n              = (once > n) ? once : n;
    }
    return n;
}

/// Open files of this process that are verbs event files: completion
/// channels, and each device context's asynchronous events.
inline int event_files()
{
    DIR *d = opendir("/proc/self/fd");
    if (d == nullptr) {
        return -1;
    }
    int n = 0;
    while (const dirent *e = readdir(d)) {
        char target[PATH_MAX];
        const std::string path = std::string("/proc/self/fd/") + e->d_name;
        const ssize_t len      = readlink(path.c_str(), target, sizeof(target) - 1);
        if (len > 0) {
            target[len] = '\0';
            n += (std::string(target) == "anon_inode:[infinibandevent]");
        }
    }
    closedir(d);
    return n;
}

} // namespace zv::test

#endif
