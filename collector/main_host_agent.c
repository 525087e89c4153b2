/*
 * fabricscope-host-agent: `fabricscope host-agent` as a binary of its own, for the
 * fabricscope-host-agent package. It links the agent's part of fs_core only (no drivers),
 * so a GPU host installs neither the collector nor the libraries of its drivers.
 */
#include "hostagent/agent.h"

int
main(int argc, char **argv)
{
    return fs_host_agent_main(argc, argv);
}
