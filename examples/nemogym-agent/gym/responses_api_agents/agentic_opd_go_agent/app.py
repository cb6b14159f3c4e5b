# Entrypoint NeMo Gym's launcher runs (`python app.py`) for the Go agent server of
# agenticopd: it turns the launcher's configuration into the JSON the Go program
# reads, then replaces itself with the program so that signals reach it.
import json
import os
import sys

from omegaconf import DictConfig, OmegaConf

SERVER_TYPES = ("responses_api_models", "resources_servers", "responses_api_agents")


def block(cfg, name):
    """The settings of instance `name`: cfg[name][server type][implementation]."""
    node = cfg[name]
    node = node[next(iter(node))]
    return node[next(iter(node))]


def main():
    cfg = OmegaConf.create(os.environ["NEMO_GYM_CONFIG_DICT"])
    me = os.environ["NEMO_GYM_CONFIG_PATH"]
    own = OmegaConf.to_container(block(cfg, me), resolve=True)
    own["name"] = me
    addrs = {}
    for name, node in cfg.items():
        if isinstance(node, DictConfig) and any(t in node for t in SERVER_TYPES):
            b = block(cfg, name)
            addrs[name] = {"host": b.get("host"), "port": b.get("port")}
    view = {"self": own, "addrs": addrs}
    if "policy_base_url" in cfg:
        view["policy_base_url"] = OmegaConf.to_container(cfg, resolve=True)["policy_base_url"]
    os.environ["GO_AGENT_CONFIG_JSON"] = json.dumps(view)
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nemogym-agent")
    if not os.path.exists(binary):
        sys.exit(f"{binary} is missing: go build -o {binary} ./examples/nemogym-agent")
    os.execv(binary, [binary, "-serve"])


if __name__ == "__main__":
    main()
