"""Driving a real invoker from outside, for the benchmarks and the tests alike: the real
services started through scripts/services.sh (``services``), a stand-in for the stock
controller on Kafka and CouchDB (``controller``) and the project's processes as children
(``processes``). Not used by the service itself."""
