package bandit

import "errors"

// ErrConfig is wrapped by every error Config.Validate returns; the message
// names the field and the value that is out of range.
var ErrConfig = errors.New("bandit: invalid config")
