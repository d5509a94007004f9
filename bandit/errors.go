package bandit

import "errors"

// ErrConfig is wrapped by every error Config.Validate returns; the message
// names the field and the value that is out of range.
var ErrConfig = errors.New("bandit: invalid config")

// ErrBadStep is wrapped by Modes' errors: an unknown mode, or a step time
// that is not a positive finite number.
var ErrBadStep = errors.New("bandit: bad step")
