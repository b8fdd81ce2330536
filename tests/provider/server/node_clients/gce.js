// gcp-metadata and google-auth-library as on a Compute Engine VM: no settings, so gcp-metadata
// races 169.254.169.254 and metadata.google.internal. for isAvailable() and GoogleAuth finds the
// metadata server itself. argv[2]: the audience of the ID token asked.
'use strict';
const gcpMetadata = require('gcp-metadata');
const {GoogleAuth} = require('google-auth-library');
const run = require('./run.js');

const auth = new GoogleAuth({scopes: ['https://www.googleapis.com/auth/cloud-platform']});
run([
  ['available', () => gcpMetadata.isAvailable()],
  ['id', () => gcpMetadata.instance('id')],
  ['zone', () => gcpMetadata.instance('zone')],
  ['tags', () => gcpMetadata.instance('tags')],
  ['listing', () => gcpMetadata.instance('')],
  ['hostname', () => gcpMetadata.instance({property: 'hostname'})],
  ['email', () => gcpMetadata.instance('service-accounts/default/email')],
  ['project_id', () => gcpMetadata.project('project-id')],
  ['numeric_project_id', () => gcpMetadata.project('numeric-project-id')],
  ['universe', () => gcpMetadata.universe('universe-domain')],
  ['recursive', () => gcpMetadata.instance({params: {recursive: true}})],
  ['missing', () => gcpMetadata.instance('attributes/no-such-key')],
  ['bulk', () => gcpMetadata.bulk([{metadataKey: 'instance/name'}, {metadataKey: 'project/project-id'}])],
  ['auth_env', () => auth.getEnv()],
  ['auth_project', () => auth.getProjectId()],
  ['auth_token', async () => {
    const client = await auth.getClient();
    const {token} = await client.getAccessToken();
    return {client: client.constructor.name, token, expiry: client.credentials.expiry_date, now: Date.now()};
  }],
  ['auth_credentials', () => auth.getCredentials()],
  ['id_token', async () => (await auth.getIdTokenClient(process.argv[2])).idTokenProvider.fetchIdToken(process.argv[2])],
]);
