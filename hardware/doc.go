// Package hardware names the machine that posteriors were learned on: a
// Fingerprint of its devices (DESIGN.md § Persistence), which scopes the
// store's records and the fleet's values, so that what one kind of
// machine learned never silently applies to another.
//
// # Usage
//
// FingerprintOf(infos) of the backends' Info, or HostFingerprint for the
// host alone; pass it to history.Options.WithFingerprint and
// fleet.DefaultOptions.
package hardware
