package plannercmd

import (
	"fmt"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/memlimit"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/llm"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/templates"
)

type nodeFlags struct {
	view    viewFlags
	metrics cli.MetricsFlags
	// reg is the process's metrics registry, made by config and served
	// beside the view and on --metrics.
	reg     *metrics.Registry
	workers int
	worker  cli.WorkerFlags
	disp    cli.DispatcherFlags
	plan    plannerFlags
}

func (n *nodeFlags) register(f *cli.Flags) {
	f.Int(&n.workers, "workers", "PLANBUS_WORKERS", 4, "tool workers to run in-process on the embedded server")
	n.worker.Register(f)
	n.disp.Register(f)
	n.plan.register(f)
}

type plannerFlags struct {
	domains       string
	templates     string
	fallback      string
	ackWait       time.Duration
	htnMaxMemory  int64
	goapMaxMemory int64
	goapMaxNodes  int
	genMaxMemory  int64
	genConc       int
	memoryLimit   int64
	llm           planner.LLMConfig
	// env reads the environment: the LLM's API key is taken from it, not
	// from a flag (argv is readable by every user of the machine).
	env func(string) string
}

// llmKeyEnv holds the API key of --llm-url.
const llmKeyEnv = cli.LLMKeyEnv

func (p *plannerFlags) register(f *cli.Flags) {
	f.Duration(&p.ackWait, "planner-ack-wait", "PLANBUS_PLANNER_ACK_WAIT", 30*time.Second, "how soon another planner takes over the requests of a dead one")
	f.String(&p.domains, "domains", "PLANBUS_DOMAINS", "", "directory of HTN (<name>.htn) and GOAP (<name>.goap.json) domains that requests may name")
	f.String(&p.templates, "templates", "PLANBUS_TEMPLATES", "", "plan template library (JSON) for requests of kind template")
	f.String(&p.fallback, "fallback-file", "PLANBUS_FALLBACK_FILE", "", "fallback texts, one per line, {input} standing for the request's input (default: three built-in texts)")
	f.String(&p.llm.URL, "llm-url", "PLANBUS_LLM_URL", "", "OpenAI-compatible Chat Completions base URL for requests of kind llm, such as http://127.0.0.1:11434/v1 (Ollama); the key from $"+llmKeyEnv)
	f.String(&p.llm.Model, "llm-model", "PLANBUS_LLM_MODEL", "", "with --llm-url: the model asked when a request names none")
	f.Duration(&p.llm.Budget, "llm-budget", "PLANBUS_LLM_BUDGET", generator.DefaultLLMBudget, "with --llm-url: the time one LLM generation may take, its repair included")
	p.env = f.Env
	f.Size(&p.htnMaxMemory, "htn-max-memory", "PLANBUS_HTN_MAX_MEMORY", generator.DefaultHTNMaxMemory,
		"most memory one HTN generation may hold (requests may ask for less in htn.budget.memory)")
	f.Size(&p.goapMaxMemory, "goap-max-memory", "PLANBUS_GOAP_MAX_MEMORY", generator.DefaultGOAPMaxMemory,
		"most memory one GOAP generation may hold (requests may ask for less in goap.budget.memory)")
	f.Int(&p.goapMaxNodes, "goap-max-nodes", "PLANBUS_GOAP_MAX_NODES", generator.DefaultGOAPMaxNodes,
		"most states one GOAP generation may expand (requests may ask for less in goap.budget.nodes)")
	f.Size(&p.genMaxMemory, "gen-max-memory", "PLANBUS_GEN_MAX_MEMORY", generator.DefaultGenMaxMemory,
		"memory all generations running at once may hold together; a generation waits until its budget fits")
	f.Int(&p.genConc, "gen-concurrency", "PLANBUS_GEN_CONCURRENCY", 0, "HTN and GOAP searches of requests run at once, and as many other generations (plans as given, templates) and half as many searches of GOAP agents beside them; the others wait in line (0: the CPU count)")
	f.Size(&p.memoryLimit, "memory-limit", "PLANBUS_MEMORY_LIMIT", 0,
		"Go's soft memory limit for this process (0: $GOMEMLIMIT if set, else --gen-max-memory + 128MiB, raised by twice the live heap that is not the running generations')")
}

// applyMemoryLimit sets the process's soft memory limit: --memory-limit,
// else $GOMEMLIMIT when set, else --gen-max-memory plus room for the rest
// of the process. Generations that fill their budgets leave as much
// garbage as they hold; with the limit, Go collects it before it doubles
// the heap. It returns the limit in force, and whether it is planbus's
// choice (neither flag nor variable given).
func (p *plannerFlags) applyMemoryLimit(env func(string) string) (limit int64, chosen bool) {
	switch {
	case p.memoryLimit > 0:
		debug.SetMemoryLimit(p.memoryLimit)
	case env("GOMEMLIMIT") == "":
		debug.SetMemoryLimit(p.genMaxMemory + memlimit.Headroom)
		chosen = true
	}
	return debug.SetMemoryLimit(-1), chosen
}

func (p *plannerFlags) config() (planner.Config, error) {
	cfg := planner.Config{DomainsDir: p.domains, AckWait: p.ackWait, Version: cli.Version(),
		HTNMaxMemory: p.htnMaxMemory, GOAPMaxMemory: p.goapMaxMemory, GOAPMaxNodes: p.goapMaxNodes,
		GenMaxMemory: p.genMaxMemory, GenConcurrency: p.genConc}
	switch {
	case p.htnMaxMemory < 1<<20:
		return cfg, fmt.Errorf("--htn-max-memory %d: want at least 1MiB", p.htnMaxMemory)
	case p.goapMaxMemory < 1<<20:
		return cfg, fmt.Errorf("--goap-max-memory %d: want at least 1MiB", p.goapMaxMemory)
	case p.goapMaxNodes < 1:
		return cfg, fmt.Errorf("--goap-max-nodes %d: want at least 1", p.goapMaxNodes)
	case p.genMaxMemory < max(p.htnMaxMemory, p.goapMaxMemory):
		return cfg, fmt.Errorf("--gen-max-memory %d: want at least --htn-max-memory (%d) and --goap-max-memory (%d), so that a generation fits",
			p.genMaxMemory, p.htnMaxMemory, p.goapMaxMemory)
	case p.genConc < 0:
		return cfg, fmt.Errorf("--gen-concurrency %d: want 0 (the CPU count) or more", p.genConc)
	}
	if p.llm.URL != "" {
		u, err := url.Parse(p.llm.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, fmt.Errorf("--llm-url %q: want an http or https URL, such as http://127.0.0.1:11434/v1", p.llm.URL)
		}
		if p.llm.Budget <= 0 {
			return cfg, fmt.Errorf("--llm-budget %s: want more than 0", p.llm.Budget)
		}
		cfg.LLM = p.llm
		if p.env != nil {
			cfg.LLM.APIKey = p.env(llmKeyEnv)
		}
	}
	if p.domains != "" {
		if st, err := os.Stat(p.domains); err != nil || !st.IsDir() {
			return cfg, fmt.Errorf("--domains %q: not a directory", p.domains)
		}
	}
	if p.templates != "" {
		var err error
		if cfg.Templates, err = templates.ReadFile(p.templates); err != nil {
			return cfg, fmt.Errorf("--templates: %w", err)
		}
	}
	if p.fallback != "" {
		b, err := os.ReadFile(p.fallback)
		if err != nil {
			return cfg, fmt.Errorf("--fallback-file: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				cfg.FallbackTemplates = append(cfg.FallbackTemplates, line)
			}
		}
		if len(cfg.FallbackTemplates) == 0 {
			return cfg, fmt.Errorf("--fallback-file %s: no texts in it", p.fallback)
		}
	}
	return cfg, nil
}

func (n *nodeFlags) config(bc bus.Config, auth bool) (node.Config, error) {
	// The workers of the node serve the llm skill with the planner's model.
	n.worker.LLM = llm.Endpoint{URL: n.plan.llm.URL, Model: n.plan.llm.Model}
	if n.plan.env != nil && n.plan.llm.URL != "" {
		n.worker.LLM.APIKey = n.plan.env(llmKeyEnv)
	}
	wc, err := n.worker.Config()
	if err != nil {
		return node.Config{}, err
	}
	if n.workers < 0 {
		return node.Config{}, fmt.Errorf("--workers %d: want 0 or more", n.workers)
	}
	pc, err := n.plan.config()
	if err != nil {
		return node.Config{}, err
	}
	if n.reg == nil {
		n.reg = metrics.New()
		n.view.metrics = n.reg
	}
	return node.Config{Bus: bc, Auth: auth, Workers: n.workers, Worker: wc, Dispatcher: n.disp.Config(), Planner: pc, Metrics: n.reg}, nil
}
