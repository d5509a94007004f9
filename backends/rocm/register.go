package rocm

import "github.com/adaptsched/adaptsched/backends"

func init() {
	backends.Register("rocm", func(arg string) (backends.Backend, error) {
		o, err := ParseArg(arg)
		if err != nil {
			return nil, err
		}
		return openBackend(o)
	})
}
