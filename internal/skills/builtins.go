package skills

import "github.com/planbus/planbus/skill"

// BuiltinConfig configures the built-in skills that touch the machine.
type BuiltinConfig struct {
	Shell ShellConfig
	HTTP  HTTPConfig
}

// Builtins returns echo, sleep, fail, shell, http and remember.
func Builtins(cfg BuiltinConfig) []skill.Skill {
	return []skill.Skill{Echo(), Sleep(), Fail(), Shell(cfg.Shell), HTTP(cfg.HTTP), Remember()}
}
