// Runs the Adobe I/O Runtime CLI plugin (an OpenWhisk CLI: `runtime action create|invoke|get`,
// `runtime activation get|logs|result`, ...) without the whole aio host CLI.
//   NODE_PATH=.cache/aio/node_modules node scripts/aio-runtime.js runtime action list
process.env.AIO_CLI_TELEMETRY_OPTOUT = process.env.AIO_CLI_TELEMETRY_OPTOUT || "true";
const path = require("path");
const oclif = require("@oclif/core");
const root = path.dirname(require.resolve("@adobe/aio-cli-plugin-runtime/package.json"));
oclif.run(process.argv.slice(2), root).then(() => oclif.flush()).catch(oclif.Errors.handle);
