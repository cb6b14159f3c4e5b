package atropos

// Pace is pace, for the external tests of the back-pressure rules.
var Pace = pace
