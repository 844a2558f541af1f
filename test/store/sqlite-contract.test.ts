import { describeLeaseContract } from '../contract/lease-contract.js';
import { describeOverStores } from '../contract/over-stores.js';
import { describeStoreContract } from '../contract/store-contract.js';

describeOverStores('sqlite', describeStoreContract);
describeOverStores('sqlite', describeLeaseContract);
