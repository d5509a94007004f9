package sim

// The package's tests open devices by name (backends.Open("sim:h100")).
func init() { Register() }
