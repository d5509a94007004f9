package eval

import "errors"

// ErrInvalidSetup: a harness run was given no arms, more than
// adaptive.MaxBackends, duplicate arms, an op an arm cannot run, an empty
// workload, or a policy chose an arm out of range.
var ErrInvalidSetup = errors.New("eval: invalid harness setup")
