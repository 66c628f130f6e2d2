// Network namespaces and the `ip` commands that set them up. Everything the lab makes lives in
// namespaces named lhw-<pid>-<site>, <pid> being the lab process's: nothing outside them is
// created or changed, and a lab that died without cleaning up is recognised by its dead pid.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace longhaul::wanlab {

// Runs argv (searched on PATH) and waits; an error carries its exit status and stderr.
Status run_command(const std::vector<std::string>& argv);

// The namespace name of `site` for the lab process `pid`.
std::string namespace_name(int pid, const std::string& site);

// Creates namespace `name` with its loopback up.
Status create_namespace(const std::string& name);
// Deletes it (its interfaces go with it); a namespace that is gone already is not an error.
void delete_namespace(const std::string& name);
// Deletes every lhw-<pid>-* namespace whose creating process no longer exists; returns how many.
int sweep_stale_namespaces();

// Calls fn() with the calling thread inside namespace `name`, then returns it to where it was.
// Interfaces fn() creates are born in `name`.
Status in_namespace(const std::string& name, const std::function<Status()>& fn);

}  // namespace longhaul::wanlab
